"""/v1 calls under beta's moderation policy, on the toy generative engines: a prompt
blocked before the engine is asked (nothing reserved or billed), a generated answer
withheld (billed for what the engine produced), a stream stopped with an error event
before its first blocked chunk, embeddings' texts moderated; a policy not for
synchronous calls changes nothing."""

from __future__ import annotations

import httpx
import openai
import orjson
import pytest

from modelport.metering.types import Unit, UsageStatus
from modelport.moderation import Disposition, PolicyDraft, Rule, Stage
from modelport.moderation.types import DecisionQuery, DecisionRecord
from tests.api_openai.conftest import World
from tests.conftest import ADMIN_KEY
from tests.polling import eventually

CREDIT = 1_000_000
RULES = (Rule("secrets", patterns=(r"password\s*=",)), Rule("five", words=("5",)))


def moderated(world: World, *, sync: bool = True) -> World:
    for model in ("acme/writer", "acme/counter"):
        for unit, micros in (("input_token", 10), ("output_token", 100)):
            world.price(model, unit, micros, failure_rule="full")
    world.credit(CREDIT)
    world.services.moderation.set_policy("beta", PolicyDraft(rules=RULES, sync=sync), "test")
    return world


def decisions(world: World) -> list[DecisionRecord]:
    return list(world.services.moderation.decisions(DecisionQuery(tenant="beta")).items)


def test_a_blocked_prompt_never_reaches_the_engine_and_costs_nothing(world_on: World) -> None:
    world = moderated(world_on)
    with pytest.raises(openai.BadRequestError) as refused:
        world.client().chat.completions.create(
            model="acme/writer",
            messages=[{"role": "user", "content": "my password = hunter2"}],
        )
    assert refused.value.code == "content_blocked"
    assert world.engine.records == []
    assert world.balance() == (CREDIT, 0) and world.entries() == []
    [record] = decisions(world)
    assert (record.stage, record.disposition, record.categories) == (
        Stage.INPUT,
        Disposition.BLOCKED,
        ("secrets",),
    )
    assert (record.model, record.version) == ("acme/writer", "1") and record.request_id


def test_a_whole_answer_that_is_blocked_is_withheld_and_billed(world: World) -> None:
    moderated(world)
    with pytest.raises(openai.BadRequestError) as refused:
        world.client().completions.create(model="acme/counter", prompt="go", max_tokens=20)
    assert refused.value.code == "content_blocked"
    assert "4" not in str(refused.value.body)

    def billed() -> bool:
        units = {e.event.unit: e.event for e in world.entries()}
        return Unit.OUTPUT_TOKEN in units

    assert eventually(billed)
    events = {e.event.unit: e.event for e in world.entries()}
    # The engine produced "1 2 3 4 5": five tokens, the blocked one included.
    assert events[Unit.OUTPUT_TOKEN].quantity == 5
    assert events[Unit.OUTPUT_TOKEN].status is UsageStatus.SUCCEEDED
    assert world.balance()[1] == 0
    output = [r for r in decisions(world) if r.stage is Stage.OUTPUT]
    assert [(r.disposition, r.categories) for r in output] == [(Disposition.BLOCKED, ("five",))]


def test_a_stream_ends_with_an_error_event_before_its_blocked_chunk(world: World) -> None:
    moderated(world)
    body = {"model": "acme/counter", "prompt": "go", "max_tokens": 20, "stream": True}
    texts, errors = [], []
    headers = {"Authorization": f"Bearer {world.key}"}
    with (
        httpx.Client(base_url=world.url, headers=headers, timeout=30) as client,
        client.stream("POST", "/v1/completions", json=body) as response,
    ):
        assert response.status_code == 200
        event = None
        for line in response.iter_lines():
            if line.startswith("event:"):
                event = line.split(":", 1)[1].strip()
            elif line.startswith("data:") and line != "data: [DONE]":
                data = orjson.loads(line[5:])
                if event == "error":
                    errors.append(data["error"])
                else:
                    texts.append(data["choices"][0]["text"])
    assert "".join(texts) == "1 2 3 4"
    assert [e["code"] for e in errors] == ["content_blocked"]
    assert eventually(lambda: any(e.event.unit is Unit.OUTPUT_TOKEN for e in world.entries()))
    [out] = [e.event for e in world.entries() if e.event.unit is Unit.OUTPUT_TOKEN]
    assert out.quantity == 5 and out.status is UsageStatus.SUCCEEDED


def test_an_allowed_stream_is_recorded_once(world: World) -> None:
    moderated(world)
    stream = world.client().chat.completions.create(
        model="acme/writer", messages=[{"role": "user", "content": "hello there"}], stream=True
    )
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text == "hello there"

    def recorded() -> bool:
        return any(r.stage is Stage.OUTPUT for r in decisions(world))

    assert eventually(recorded)
    assert sorted((r.stage.value, r.disposition.value) for r in decisions(world)) == [
        ("input", "allowed"),
        ("output", "allowed"),
    ]


def test_embeddings_texts_are_moderated(world: World) -> None:
    moderated(world)
    with pytest.raises(openai.BadRequestError) as refused:
        world.client().embeddings.create(model="acme/embedder", input=["ok", "password = 1"])
    assert refused.value.code == "content_blocked"
    assert len(world.client().embeddings.create(model="acme/embedder", input=["ok"]).data) == 1


def test_a_policy_not_for_synchronous_calls_changes_nothing(world: World) -> None:
    moderated(world, sync=False)
    answer = world.client().chat.completions.create(
        model="acme/writer", messages=[{"role": "user", "content": "password = 5"}]
    )
    assert answer.choices[0].message.content == "password = 5"
    assert decisions(world) == []


def test_the_admin_key_is_not_moderated(world: World) -> None:
    moderated(world)
    answer = world.client(key=ADMIN_KEY).chat.completions.create(
        model="acme/writer", messages=[{"role": "user", "content": "password = 5"}]
    )
    assert answer.choices[0].message.content == "password = 5"


def test_calls_through_an_endpoint_are_moderated_too(world: World) -> None:
    moderated(world)
    world.deploy("chat", "acme/counter:1")
    world.deploy("embed", "acme/embedder:1")
    with pytest.raises(openai.BadRequestError) as prompt:
        world.client().completions.create(model="chat", prompt="password = 1", max_tokens=3)
    assert prompt.value.code == "content_blocked"
    with pytest.raises(openai.BadRequestError) as answer:
        world.client().completions.create(model="chat", prompt="go", max_tokens=9)
    assert answer.value.code == "content_blocked"  # "5" was generated
    with pytest.raises(openai.BadRequestError) as texts:
        world.client().embeddings.create(model="embed", input=["password = 1"])
    assert texts.value.code == "content_blocked"
    assert len(world.client().embeddings.create(model="embed", input=["fine"]).data) == 1
    blocked = [r for r in decisions(world) if r.disposition is Disposition.BLOCKED]
    assert sorted((r.stage.value, r.model) for r in blocked) == [
        ("input", "acme/counter"),
        ("input", "acme/embedder"),
        ("output", "acme/counter"),
    ]
