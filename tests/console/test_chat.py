"""The model page's chat box over a real generative engine (the toy chat engine of
tests/api_openai): the answer streamed from /v1 as JSON lines with its usage, latency
and price; routed to the task's cheapest model when the routing box is ticked; refused
when malformed, without the CSRF token, or for a tensor model."""

from __future__ import annotations

import json
from typing import Any

from starlette.testclient import TestClient

from modelport.api import create_app
from tests.api_openai.conftest import CHAT_FORMAT, TEXT_IO, World, publish
from tests.console.conftest import csrf_of

WRITER = "acme/writer"


def signed_in(world: World) -> TestClient:
    client = TestClient(create_app(world.services))
    form = client.get("/console/sign-in")
    signed = client.post(
        "/console/sign-in",
        data={"csrf_token": csrf_of(form.text), "api_key": world.key},
        follow_redirects=False,
    )
    assert signed.status_code == 303
    return client


def chat(client: TestClient, csrf: str, turns: Any, model: str = WRITER) -> Any:
    return client.post(
        f"/console/models/{model}/chat",
        data={"csrf_token": csrf, "messages": json.dumps(turns)},
    )


def test_a_chat_is_streamed_with_its_usage_and_price(chat_world: World) -> None:
    chat_world.price(WRITER, "output_token", 7)
    chat_world.credit(1_000_000)
    client = signed_in(chat_world)
    page = client.get(f"/console/models/{WRITER}")
    assert page.status_code == 200 and 'id="chat-form"' in page.text
    assert "Run version" not in page.text  # no tensor playground for a chat model
    assert "/v1/chat/completions" in page.text and "tritonclient" not in page.text
    assert f'model="{WRITER}"' in page.text.replace("&#34;", '"')  # the openai SDK example
    csrf = csrf_of(page.text)
    with client.stream(
        "POST",
        f"/console/models/{WRITER}/chat",
        data={"csrf_token": csrf, "messages": json.dumps([{"role": "user", "content": "a b c"}])},
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("application/x-ndjson")
        lines = [json.loads(line) for line in response.iter_lines() if line]
    deltas = [line["delta"] for line in lines if "delta" in line]
    assert len(deltas) >= 2 and "".join(deltas).split() == ["a", "b", "c"]
    done = lines[-1]
    assert done["done"] is True and done["latency_ms"] > 0
    completion = done["usage"]["completion_tokens"]
    assert completion == 3 and done["price_micros"] == 7 * completion
    entries = [e.event for e in chat_world.entries() if e.event.model == WRITER]
    assert {(e.tenant, e.key_id) for e in entries} == {("beta", chat_world.key_id)}
    assert sum(e.amount_micros for e in entries) == done["price_micros"]


def test_a_routed_chat_names_the_model_that_served_it_and_its_price(chat_world: World) -> None:
    scribe = "acme/scribe"
    publish(chat_world.admin, chat_world.services, scribe, CHAT_FORMAT, "chat", **TEXT_IO)
    chat_world.price(WRITER, "output_token", 7)
    chat_world.price(scribe, "output_token", 2)
    chat_world.credit(1_000_000)
    client = signed_in(chat_world)
    page = client.get(f"/console/models/{WRITER}")
    assert "route:chat" in page.text
    turns = json.dumps([{"role": "user", "content": "a b c"}])
    form = {"csrf_token": csrf_of(page.text), "messages": turns, "route": "1"}
    response = client.post(f"/console/models/{WRITER}/chat", data={**form, "prefer": "cheapest"})
    assert response.status_code == 200, response.text
    done = json.loads(response.text.splitlines()[-1])
    assert done["model"] == f"{scribe}:1"
    assert done["price_micros"] == 2 * done["usage"]["completion_tokens"] == 6
    assert [e.event.model for e in chat_world.entries() if e.event.amount_micros] == [scribe]
    refused = client.post(f"/console/models/{WRITER}/chat", data={**form, "prefer": "soonest"})
    assert refused.status_code == 400 and refused.json()["code"] == "invalid_route"


def test_a_malformed_conversation_is_refused_before_any_call(chat_world: World) -> None:
    client = signed_in(chat_world)
    csrf = csrf_of(client.get(f"/console/models/{WRITER}").text)
    for turns in (
        [],
        [{"role": "system", "content": "x"}],
        [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}],
        [{"role": "user", "content": "x" * 20_001}],
        {"role": "user", "content": "hi"},
    ):
        refused = chat(client, csrf, turns)
        assert refused.status_code == 400 and refused.json()["code"] == "invalid_chat"
    refused = client.post(
        f"/console/models/{WRITER}/chat", data={"csrf_token": csrf, "messages": "{not json"}
    )
    assert refused.status_code == 400
    assert chat_world.engine.records == []


def test_a_chat_needs_the_csrf_token(chat_world: World) -> None:
    client = signed_in(chat_world)
    refused = chat(client, "forged", [{"role": "user", "content": "hi"}])
    assert refused.status_code == 403 and "csrf_refused" in refused.text
    assert chat_world.engine.records == []


def test_the_apis_refusal_is_passed_on(chat_world: World) -> None:
    client = signed_in(chat_world)
    csrf = csrf_of(client.get(f"/console/models/{WRITER}").text)
    missing = chat(client, csrf, [{"role": "user", "content": "hi"}], model="acme/nothing")
    assert missing.status_code == 404 and missing.json()["code"] == "model_not_found"
