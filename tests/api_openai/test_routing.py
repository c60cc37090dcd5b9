"""Routing by need on ``/v1`` through the ``openai`` SDK: ``model: "route:chat"`` with the
body's ``route`` preferences picks among the chat models beta may call, by price, live
latency and verified score; falls back when the first fails, billing the one that
answered once; never routes to a model beta may not call; says why nothing matched."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from modelport.metering.types import Unit, UsageStatus
from tests.api_openai.conftest import World, build_world
from tests.api_openai.routing import PRICES, Routed, fresh_latency, route_world
from tests.databases import migrated_sqlite
from tests.polling import eventually

HELLO = [{"role": "user", "content": "hello there"}]
ROUTED = "modelport-routed-model"


@pytest.fixture(scope="module")
def routed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Routed]:
    home = tmp_path_factory.mktemp("routed")
    with pytest.MonkeyPatch.context() as monkeypatch:
        world = build_world(home / "home", migrated_sqlite(home / "home.db"), monkeypatch)
        try:
            yield route_world(world)
        finally:
            world.close()


def chat(world: World, route: dict[str, Any] | None = None, **options: Any) -> tuple[str, str]:
    """A routed chat's answer ``model`` and its routed-model header."""
    extra = {} if route is None else {"route": route}
    raw = world.client().chat.completions.with_raw_response.create(
        model="route:chat", messages=HELLO, max_tokens=2, extra_body=extra, **options
    )
    answer = raw.parse()
    assert answer.choices[0].message.content == "hello there"
    return answer.model, raw.headers[ROUTED]


def test_each_preference_picks_its_model_among_those_the_caller_may_call(routed: Routed) -> None:
    world = routed.world
    # acme/secret is cheapest and best, but private to acme: never beta's.
    assert chat(world, {"prefer": "cheapest"}) == ("acme/cheap:1", "acme/cheap:1")
    assert chat(world, {"prefer": "best"}) == ("acme/premium:1", "acme/premium:1")
    assert chat(world) == ("acme/premium:1", "acme/premium:1")  # best by default
    fresh_latency(world, writer=5, cheap=50, premium=500)
    assert chat(world, {"prefer": "fastest"})[0] == "acme/writer:1"
    # Filters: the cheapest scoring at least 0.6 is the writer; under 50 ms, the writer.
    assert chat(world, {"prefer": "cheapest", "min_score": 0.6})[0] == "acme/writer:1"
    fresh_latency(world, writer=400, cheap=50, premium=500)
    best_fast = {"prefer": "best", "max_latency_ms": 100}
    assert chat(world, best_fast)[0] == "acme/cheap:1"
    # A stream names its model in each chunk and in the header.
    with world.client().chat.completions.with_streaming_response.create(
        model="route:chat",
        messages=HELLO,
        max_tokens=2,
        stream=True,
        extra_body={"route": {"prefer": "cheapest"}},
    ) as response:
        assert response.headers[ROUTED] == "acme/cheap:1"
        models = {chunk.model for chunk in response.parse()}
    assert models == {"acme/cheap:1"}
    assert not routed.cheap.failing and routed.premium.records


def test_nothing_matching_is_route_no_candidate_with_the_reasons(routed: Routed) -> None:
    client = routed.world.client()
    with pytest.raises(openai.UnprocessableEntityError) as refused:
        client.chat.completions.create(
            model="route:chat", messages=HELLO, extra_body={"route": {"max_price": 1000}}
        )
    error = refused.value.body
    assert isinstance(error, dict) and error["code"] == "route_no_candidate"
    assert "acme/cheap:1: price 10000" in error["message"]
    assert "acme/secret" not in str(refused.value.response.text)  # never named to beta
    with pytest.raises(openai.NotFoundError) as missing:
        client.chat.completions.create(model="route:translation", messages=HELLO)
    assert isinstance(missing.value.body, dict)
    assert missing.value.body["code"] == "route_no_candidate"
    for bad in ({"prefer": "loudest"}, {"max_price": -1}, {"colour": "red"}, "cheap"):
        with pytest.raises(openai.BadRequestError) as invalid:
            client.chat.completions.create(
                model="route:chat", messages=HELLO, extra_body={"route": bad}
            )
        assert isinstance(invalid.value.body, dict)
        assert invalid.value.body["code"] == "invalid_route", bad
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="route:Not A Task", messages=HELLO)


@pytest.fixture
def routed_on(
    tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Routed]:
    world = build_world(tmp_path / "home", database_url, monkeypatch)
    try:
        yield route_world(world)
    finally:
        world.close()


def test_a_failing_first_choice_falls_back_and_only_the_answer_is_billed(
    routed_on: Routed,
) -> None:
    world = routed_on.world
    routed_on.cheap.failing = True
    before = world.balance()[0]
    assert chat(world, {"prefer": "cheapest"}) == ("acme/writer:1", "acme/writer:1")
    assert not routed_on.cheap.records  # refused at submission: nothing ran there

    def charged() -> list[Any]:
        return [e.event for e in world.entries() if e.event.unit is Unit.OUTPUT_TOKEN]

    assert eventually(lambda: any(e.model == "acme/writer" for e in charged()))
    events = charged()
    answered = [e for e in events if e.status is UsageStatus.SUCCEEDED]
    assert [(e.model, e.quantity) for e in answered] == [("acme/writer", 2)]
    assert sum(e.amount_micros for e in events) == 2 * PRICES["acme/writer"]
    assert all(e.amount_micros == 0 for e in events if e.model == "acme/cheap")
    assert world.balance() == (before - 2 * PRICES["acme/writer"], 0)
    # Every candidate down: the last failure is the answer (the writer fails on "boom").
    routed_on.premium.failing = True
    boom = [{"role": "user", "content": "boom"}]
    with pytest.raises(openai.InternalServerError) as down:
        world.client().chat.completions.create(
            model="route:chat", messages=boom, max_tokens=2, extra_body={"route": {}}
        )
    assert down.value.status_code == 503
    assert world.balance() == (before - 2 * PRICES["acme/writer"], 0)
    # A refusal of the request itself is the answer at once: no other model is tried.
    routed_on.cheap.failing = routed_on.premium.failing = False
    routed_on.cheap.context_length = 1
    seen = len(world.engine.records), len(routed_on.premium.records)
    with pytest.raises(openai.BadRequestError) as refused:
        chat(world, {"prefer": "cheapest"})
    assert isinstance(refused.value.body, dict)
    assert refused.value.body["code"] == "context_length_exceeded"
    assert (len(world.engine.records), len(routed_on.premium.records)) == seen
