"""Degradation under load on ``/v1``: with a model's predicted queue wait past the
threshold (a wait source the test sets, not real load), its ``batch`` and ``offline``
calls go to its configured cheaper fallback, billed at the fallback's price, or are
shed with 503 ``degraded`` and ``Retry-After``; its interactive calls are served by it
as ever. Once the wait drops, low-priority calls are its own again."""

from __future__ import annotations

from typing import Any

import openai
import pytest

from modelport.inference.degrade import Degradation
from modelport.metering.types import Unit, UsageStatus
from tests.api_openai.conftest import World
from tests.api_openai.routing import PRICES, Waits, route_world
from tests.polling import eventually

HELLO = [{"role": "user", "content": "hello there"}]
ROUTED = "modelport-routed-model"


def call(world: World, model: str, **body: Any) -> tuple[str, str | None]:
    raw = world.client().chat.completions.with_raw_response.create(
        model=model, messages=HELLO, max_tokens=2, extra_body=body
    )
    answer = raw.parse()
    assert answer.choices[0].message.content == "hello there"
    return answer.model, raw.headers.get(ROUTED)


def shed(world: World, model: str, priority: str) -> openai.APIStatusError:
    with pytest.raises(openai.InternalServerError) as refused:
        call(world, model, priority=priority)
    return refused.value


def test_under_load_low_priority_calls_go_to_the_fallback_or_are_shed(world: World) -> None:
    routed = route_world(world)
    waits = Waits()
    inference = world.services.inference
    inference.degradation = Degradation(waits, 2.0, {"acme/premium": "acme/cheap"})
    waits.seconds.update({"acme/premium": 9.0, "acme/writer": 7.4})
    # Interactive calls keep their model, however loaded.
    assert call(world, "acme/premium") == ("acme/premium", None)
    assert call(world, "acme/writer") == ("acme/writer", None)
    assert len(routed.premium.records) == 1 and not routed.cheap.records
    # Batch and offline calls of the loaded model go to its fallback, named in the header.
    assert call(world, "acme/premium", priority="batch") == ("acme/premium", "acme/cheap:1")
    assert call(world, "acme/premium", priority="offline")[1] == "acme/cheap:1"
    assert len(routed.premium.records) == 1 and len(routed.cheap.records) == 2
    # A loaded model with no fallback sheds them, saying when to come back.
    refused = shed(world, "acme/writer", "batch")
    assert refused.status_code == 503 and refused.response.headers["retry-after"] == "7"
    assert isinstance(refused.body, dict) and refused.body["code"] == "degraded"
    # A fallback loaded itself is no way out: shed.
    waits.seconds["acme/cheap"] = 3.0
    assert shed(world, "acme/premium", "batch").status_code == 503
    assert len(routed.cheap.records) == 2
    # The load drains: batch calls are the model's own again.
    waits.seconds.clear()
    assert call(world, "acme/premium", priority="batch") == ("acme/premium", None)
    assert len(routed.premium.records) == 2

    def answered() -> list[Any]:
        return [
            e.event
            for e in world.entries()
            if e.event.unit is Unit.OUTPUT_TOKEN and e.event.status is UsageStatus.SUCCEEDED
        ]

    assert eventually(lambda: len(answered()) == 5)
    billed = sorted((e.model, e.amount_micros) for e in answered())
    assert billed == sorted(
        [("acme/premium", 2 * PRICES["acme/premium"])] * 2
        + [("acme/cheap", 2 * PRICES["acme/cheap"])] * 2
        + [("acme/writer", 2 * PRICES["acme/writer"])]
    )


def test_a_fallback_the_caller_may_not_call_is_no_way_out(world: World) -> None:
    routed = route_world(world)
    waits = Waits()
    world.services.inference.degradation = Degradation(waits, 1.0, {"acme/cheap": "acme/secret"})
    waits.seconds["acme/cheap"] = 4.0
    refused = shed(world, "acme/cheap", "batch")
    assert isinstance(refused.body, dict) and refused.body["code"] == "degraded"
    assert "acme/secret" not in refused.response.text
    assert not routed.cheap.records
