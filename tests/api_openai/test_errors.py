"""/v1 errors in OpenAI's error object, with the platform's stable codes, as the SDK
raises them: unknown model 404, bad parameters 400, no or a wrong key 401, over budget
402, rate limited 429 with Retry-After, a context that can never fit 400; an error
after the first chunk ends the stream with an ``error`` event."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest

from modelport.tenancy.limits import ScopeType
from tests.api_openai.conftest import FAILING_WORD, TEXT_IO, World, publish

HELLO = [{"role": "user", "content": "hello"}]


def error_of(response: httpx.Response) -> dict[str, Any]:
    body = response.json()
    assert set(body) == {"error"}, body
    error: dict[str, Any] = body["error"]
    assert set(error) == {"message", "type", "param", "code"}, error
    return error


def chat(world: World, **body: Any) -> Any:
    return world.client().chat.completions.create(**{"messages": HELLO, **body})


@pytest.mark.parametrize(
    "model",
    ["acme/nothing", "acme/writer:9", "acme/writer@nope", "a/b/c", "acme/Writer", "x" * 600],
)
def test_an_unknown_model_is_404_model_not_found(shared_world: World, model: str) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        chat(shared_world, model=model)
    assert caught.value.code == "model_not_found"
    assert caught.value.type == "invalid_request_error" and caught.value.param == "model"
    assert shared_world.engine.records == []


def test_another_tenants_private_model_is_as_unknown_as_a_missing_one(world: World) -> None:
    world.services.tenancy.create_tenant("gamma", actor="admin")
    publish(
        world.admin,
        world.services,
        "gamma/secret",
        "toy-chat",
        "chat",
        visibility="private",
        **TEXT_IO,
    )
    with pytest.raises(openai.NotFoundError) as caught:
        chat(world, model="gamma/secret")
    assert caught.value.code == "model_not_found"
    assert world.engine.records == []


def test_a_version_and_an_alias_name_the_version_to_call(world: World) -> None:
    moved = world.admin.put("/api/models/acme/writer/aliases/prod", json={"version": "1"})
    assert moved.status_code == 200, moved.text
    for model in ("acme/writer:1", "acme/writer@prod"):
        answer = chat(world, model=model)
        assert answer.choices[0].message.content == "hello" and answer.model == model


@pytest.mark.parametrize(
    ("body", "code", "param"),
    [
        ({"temperature": 5}, "invalid_parameter", "temperature"),
        ({"top_p": 0}, "invalid_parameter", "top_p"),
        ({"max_tokens": 0}, "invalid_max_tokens", "max_tokens"),
        ({"max_tokens": "ten"}, "invalid_max_tokens", "max_tokens"),
        ({"n": 17}, "invalid_n", "n"),
        ({"stop": ["a", "b", "c", "d", "e"]}, "invalid_parameter", "stop"),
        ({"messages": []}, "invalid_parameter", "messages"),
        ({"messages": [{"role": "robot", "content": "x"}]}, "invalid_parameter", "messages[0]"),
        ({"stream_options": {"include_usage": True}}, "invalid_parameter", "stream_options"),
        ({"presence_penalty": 2.5}, "invalid_parameter", "presence_penalty"),
        ({"logit_bias": {"hello": 1}}, "invalid_parameter", "logit_bias"),
        ({"logit_bias": {"7": 101}}, "invalid_parameter", "logit_bias"),
        ({"response_format": {"type": "xml"}}, "invalid_parameter", "response_format"),
        ({"response_format": {"type": "json_schema"}}, "invalid_parameter", "response_format"),
        ({"tools": [{"type": "function"}]}, "invalid_parameter", "tools"),
        (
            {
                "tools": [{"type": "function", "function": {"name": "f"}}],
                "tool_choice": {"type": "function", "function": {"name": "g"}},
            },
            "invalid_parameter",
            "tool_choice",
        ),
        (
            {
                "tools": [{"type": "function", "function": {"name": "f"}}],
                "response_format": {"type": "json_object"},
            },
            "invalid_parameter",
            "response_format",
        ),
        ({"tool_choice": "required"}, "invalid_parameter", "tool_choice"),
        ({"functions": [{"name": "f"}]}, "unsupported_parameter", "functions"),
    ],
)
def test_bad_parameters_are_400_naming_the_parameter(
    shared_world: World, body: dict[str, Any], code: str, param: str
) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        chat(shared_world, model="acme/writer", **body)
    assert (caught.value.code, caught.value.param) == (code, param)
    assert caught.value.type == "invalid_request_error"
    assert shared_world.engine.records == []


def test_bad_completion_prompts_and_bodies_are_400(world: World) -> None:
    client = world.client()
    with pytest.raises(openai.BadRequestError) as caught:
        client.completions.create(model="acme/writer", prompt=[1, 2, 3])
    assert (caught.value.code, caught.value.param) == ("unsupported_parameter", "prompt")
    with pytest.raises(openai.BadRequestError) as caught:
        client.completions.create(model="acme/writer", prompt="x", logprobs=9)
    assert caught.value.param == "logprobs"
    raw = httpx.post(
        world.url + "/v1/chat/completions",
        content=b"{not json",
        headers={"Authorization": f"Bearer {world.key}", "Content-Type": "application/json"},
    )
    assert raw.status_code == 400 and error_of(raw)["code"] == "invalid_json"
    missing = httpx.post(
        world.url + "/v1/chat/completions",
        json={"messages": HELLO},
        headers={"Authorization": f"Bearer {world.key}"},
    )
    assert missing.status_code == 400
    assert error_of(missing)["param"] == "model"


def test_no_key_or_a_wrong_key_is_401(world: World) -> None:
    with pytest.raises(openai.AuthenticationError) as caught:
        chat(world, model="acme/writer", extra_headers={"Authorization": "Bearer mp_live_nope"})
    assert caught.value.code == "invalid_credentials"
    assert caught.value.type == "authentication_error"
    for path in ("/v1/models", "/v1/chat/completions"):
        raw = httpx.request(
            "GET" if path.endswith("models") else "POST",
            world.url + path,
            json={"model": "acme/writer", "messages": HELLO},
        )
        assert raw.status_code == 401
        assert error_of(raw)["code"] == "missing_credentials"
        assert raw.headers["www-authenticate"].startswith("Bearer")
    assert world.engine.records == []


def test_over_budget_is_402_before_anything_runs(world: World) -> None:
    world.price("acme/writer", "output_token", 100)
    world.credit(1_000)  # max_tokens 16 at 100 each is held: 1,600
    with pytest.raises(openai.APIStatusError) as caught:
        chat(world, model="acme/writer", max_tokens=16)
    assert caught.value.status_code == 402
    assert caught.value.code == "budget_exceeded" and caught.value.type == "insufficient_quota"
    assert world.engine.records == []
    assert world.balance() == (1_000, 0)
    fits = chat(world, model="acme/writer", max_tokens=5)  # held 500: it runs
    assert fits.choices[0].message.content == "hello"


def test_rate_limited_is_429_with_retry_after(world: World) -> None:
    world.services.limits.set_limits(
        ScopeType.KEY, world.key_id, tenant=None, rpm=1, concurrency=None, tpm=None, actor="t"
    )
    assert chat(world, model="acme/writer").choices[0].message.content == "hello"
    with pytest.raises(openai.RateLimitError) as caught:
        chat(world, model="acme/writer", stream=True)
    assert caught.value.code == "rate_limited" and caught.value.type == "rate_limit_error"
    assert int(caught.value.response.headers["retry-after"]) >= 1
    assert len(world.engine.records) == 1


def test_a_request_that_can_never_fit_the_context_is_400(world: World) -> None:
    world.price("acme/writer", "output_token", 1)
    world.credit(1_000_000)
    with pytest.raises(openai.BadRequestError) as caught:
        chat(world, model="acme/writer", max_tokens=5_000, stream=True)
    assert caught.value.code == "context_length_exceeded"
    assert world.balance() == (1_000_000, 0)  # the hold was given back whole


def test_an_error_after_the_first_chunk_ends_the_stream_with_an_error_event(
    world: World,
) -> None:
    stream = chat(
        world,
        model="acme/writer",
        messages=[{"role": "user", "content": f"fine so far {FAILING_WORD}"}],
        stream=True,
    )
    seen = ""
    with pytest.raises(openai.APIError) as caught:
        for chunk in stream:
            seen += chunk.choices[0].delta.content or ""
    assert seen == "fine so far"
    assert caught.value.code == "engine_failed"
    raw = httpx.post(
        world.url + "/v1/chat/completions",
        json={
            "model": "acme/writer",
            "messages": [{"role": "user", "content": f"x {FAILING_WORD}"}],
            "stream": True,
        },
        headers={"Authorization": f"Bearer {world.key}"},
    )
    assert raw.status_code == 200
    assert raw.text.endswith("event: error\ndata: " + raw.text.split("data: ")[-1])
    assert "[DONE]" not in raw.text and '"code":"engine_failed"' in raw.text


def test_the_same_error_in_a_whole_answer_is_a_plain_http_error(world: World) -> None:
    with pytest.raises(openai.InternalServerError) as caught:
        chat(world, model="acme/writer", messages=[{"role": "user", "content": FAILING_WORD}])
    assert caught.value.status_code == 503 and caught.value.code == "engine_failed"


def test_unknown_paths_and_methods_answer_in_openais_shape(world: World) -> None:
    auth = {"Authorization": f"Bearer {world.key}"}
    unknown = httpx.get(world.url + "/v1/nothing", headers=auth)
    assert unknown.status_code == 404 and error_of(unknown)["type"] == "invalid_request_error"
    wrong = httpx.get(world.url + "/v1/chat/completions", headers=auth)
    assert wrong.status_code == 405 and error_of(wrong)["code"] == "method_not_allowed"


@pytest.mark.parametrize("stream", [False, True])
def test_a_text_call_of_a_tensor_model_names_the_surface_that_serves_it(
    shared_world: World, stream: bool
) -> None:
    with pytest.raises(openai.UnprocessableEntityError) as caught:
        chat(shared_world, model="acme/embedder:1", stream=stream)
    error = caught.value
    assert error.status_code == 422 and error.code == "streaming_unsupported"
    assert "'acme/embedder:1' is a tensor model" in error.message
    assert "POST /v2/models/acme/embedder/versions/1/infer" in error.message
    assert "cannot stream" not in error.message
