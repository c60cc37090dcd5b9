"""The pure parts of /v1: model names to targets, and request bodies to records."""

from __future__ import annotations

import pytest

from modelport.api.openai.errors import error_object
from modelport.api.openai.names import name_of, target_of
from modelport.api.openai.requests import parse_chat, parse_completion, parse_embedding
from modelport.errors import InvalidInput, NotFound
from modelport.inference.types import EndpointTarget, ModelTarget
from modelport.runtime.types import ChatMessage, Priority


@pytest.mark.parametrize(
    ("name", "target"),
    [
        ("acme/writer", ModelTarget("acme", "writer")),
        ("acme/writer:1.2", ModelTarget("acme", "writer", "1.2")),
        ("acme/writer@prod", ModelTarget("acme", "writer", "prod")),
        ("chat-v2", EndpointTarget("chat-v2")),
    ],
)
def test_names_and_their_targets(name: str, target: object) -> None:
    assert target_of(name) == target
    assert target_of(name_of(target_of(name))) == target  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "name", ["", "Chat", "a/b/c", "acme/", "/writer", "acme/writer@", "acme/writer@Prod", "a b"]
)
def test_names_that_cannot_exist_are_model_not_found(name: str) -> None:
    with pytest.raises(NotFound) as caught:
        target_of(name)
    assert caught.value.code == "model_not_found" and caught.value.extra["param"] == "model"


def test_a_chat_with_every_served_field() -> None:
    parsed = parse_chat(
        {
            "model": "acme/writer",
            "messages": [
                {"role": "developer", "content": "terse"},
                {
                    "role": "user",
                    "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
                },
            ],
            "max_completion_tokens": 9,
            "n": 2,
            "temperature": 0,
            "top_p": 1,
            "top_k": 5,
            "stop": "x",
            "seed": 3,
            "logprobs": True,
            "top_logprobs": 2,
            "stream": True,
            "stream_options": {"include_usage": True},
            "priority": "batch",
            "user": "u-1",
            "presence_penalty": 0,
            "tools": [],
            "whatever": {"unknown": "ignored"},
        }
    )
    assert parsed.messages == (ChatMessage("system", "terse"), ChatMessage("user", "ab"))
    s = parsed.sampling
    assert (s.max_tokens, s.n, s.stream, s.include_usage, s.logprobs) == (9, 2, True, True, True)
    assert s.priority is Priority.BATCH and s.user == "u-1"
    assert s.parameters == {
        "temperature": 0.0,
        "top_p": 1.0,
        "top_k": 5,
        "stop": ["x"],
        "seed": 3,
        "logprobs": True,
        "top_logprobs": 2,
    }


def test_priority_offline_is_accepted() -> None:
    chat = parse_chat(
        {"model": "m/x", "messages": [{"role": "user", "content": "hi"}], "priority": "offline"}
    )
    assert chat.sampling.priority is Priority.OFFLINE
    completion = parse_completion({"model": "m/x", "prompt": "a", "priority": "offline"})
    assert completion.sampling.priority is Priority.OFFLINE
    embedding = parse_embedding({"model": "m/x", "input": "a", "priority": "offline"})
    assert embedding.priority is Priority.OFFLINE
    assert parse_embedding({"model": "m/x", "input": "a"}).priority is None
    with pytest.raises(InvalidInput) as caught:
        parse_embedding({"model": "m/x", "input": "a", "priority": "later"})
    assert caught.value.extra["param"] == "priority"


def test_defaults_and_nulls() -> None:
    chat = parse_chat({"model": "m/x", "messages": [{"role": "user", "content": "hi"}], "n": None})
    # No bound asked for: to the end of the context (the read step fills it in).
    assert (chat.sampling.max_tokens, chat.sampling.n, chat.sampling.parameters) == (None, 1, {})
    completion = parse_completion({"model": "m/x", "prompt": ["a", "b"], "max_tokens": None})
    assert completion.prompts == ("a", "b") and completion.sampling.max_tokens == 16


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"top_logprobs": 2}, "top_logprobs"),
        ({"seed": 1.5}, "seed"),
        ({"stream": "yes"}, "stream"),
        ({"priority": "urgent"}, "priority"),
        ({"user": 7}, "user"),
        ({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, "messages"),
        ({"messages": [{"role": "assistant", "content": None}]}, "messages"),
    ],
)
def test_bad_chat_fields(body: dict[str, object], param: str) -> None:
    doc = {"model": "m/x", "messages": [{"role": "user", "content": "hi"}], **body}
    with pytest.raises(InvalidInput) as caught:
        parse_chat(doc)
    assert caught.value.extra["param"] == param


def test_embedding_requests() -> None:
    parsed = parse_embedding({"model": "m/e", "input": ["a", "b"], "encoding_format": None})
    assert (parsed.texts, parsed.encoding_format, parsed.dimensions) == (("a", "b"), "float", None)
    with pytest.raises(InvalidInput) as caught:
        parse_embedding({"model": "m/e", "input": "a", "encoding_format": "int8"})
    assert caught.value.extra["param"] == "encoding_format"


def test_the_error_object() -> None:
    assert error_object(429, "rate_limited", "slow down") == {
        "message": "slow down",
        "type": "rate_limit_error",
        "param": None,
        "code": "rate_limited",
    }
    assert error_object(503, "unavailable", "x", {"field": "f"})["type"] == "server_error"
    assert error_object(503, "unavailable", "x", {"field": "f"})["param"] == "f"
