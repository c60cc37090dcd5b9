"""Degradation under load on ``/v1``: with a model's predicted queue wait past the
threshold (a wait source the test sets, not real load), its ``batch`` and ``offline``
calls go to its configured cheaper fallback, billed at the fallback's price, or are
shed with 503 ``degraded`` and ``Retry-After``; its interactive calls are served by it
as ever. Once the wait drops, low-priority calls are its own again."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import httpx
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


def tier(world: World, tenant: str, value: str, key: str | None = None) -> httpx.Response:
    headers = None if key is None else {"Authorization": f"Bearer {key}"}
    return world.admin.put(f"/api/tenants/{tenant}/tier", json={"tier": value}, headers=headers)


def test_a_lower_tier_tenant_gives_way_and_a_premium_one_keeps_its_priority_rule(
    world: World,
) -> None:
    routed = route_world(world)
    waits = Waits()
    inference = world.services.inference
    assert inference.degradation is not None  # wired: the tier source is the platform's
    inference.degradation = replace(
        inference.degradation,
        waits=waits,
        threshold_seconds=2.0,
        fallbacks={"acme/premium": "acme/cheap"},
    )
    waits.seconds.update({"acme/premium": 9.0, "acme/writer": 5.0})
    # beta is standard (the default): its interactive calls keep going under load.
    assert world.admin.get("/api/tenants/beta").json()["tier"] == "standard"
    assert call(world, "acme/premium") == ("acme/premium", None)
    # Only the operator moves a tenant between tiers.
    refused = tier(world, "beta", "free", key=world.key)
    assert refused.status_code == 403, refused.text
    assert tier(world, "beta", "gold").status_code == 400  # the API's invalid body
    moved = tier(world, "beta", "free")
    assert moved.status_code == 200 and moved.json()["tier"] == "free"
    # Free: its interactive calls give way like batch ones (the cached tier was dropped).
    assert call(world, "acme/premium") == ("acme/premium", "acme/cheap:1")
    assert shed(world, "acme/writer", "interactive").status_code == 503
    # Without load, a free tenant is served by the model it asked for.
    waits.seconds.clear()
    assert call(world, "acme/premium") == ("acme/premium", None)
    # Premium: interactive calls keep going; the batch calls it makes still give way.
    waits.seconds.update({"acme/premium": 9.0, "acme/writer": 5.0})
    assert tier(world, "beta", "premium").json()["tier"] == "premium"
    assert call(world, "acme/premium") == ("acme/premium", None)
    assert call(world, "acme/premium", priority="batch") == ("acme/premium", "acme/cheap:1")
    assert len(routed.premium.records) == 3 and len(routed.cheap.records) == 2


def test_an_endpoint_degrades_by_its_own_policy(world: World) -> None:
    routed = route_world(world)
    world.deploy("chat", "acme/premium:1")
    waits = Waits()
    inference = world.services.inference
    assert inference.degradation is not None
    # The installation degrades nothing (no threshold): only the endpoint's policy does.
    assert inference.degradation.threshold_seconds is None
    inference.degradation = replace(inference.degradation, waits=waits)
    waits.seconds["acme/premium"] = 3.0

    def served(priority: str) -> str:
        """Which engine answered the endpoint's call (the answer names the endpoint)."""
        before = len(routed.cheap.records), len(routed.premium.records)
        assert call(world, "chat", priority=priority)[0] == "chat"
        after = len(routed.cheap.records), len(routed.premium.records)
        return {(1, 0): "acme/cheap", (0, 1): "acme/premium"}[
            (after[0] - before[0], after[1] - before[1])
        ]

    assert served("batch") == "acme/premium"
    assert world.admin.get("/api/endpoints/chat/degradation").json()["policy"] is None
    # A fallback beta may not call, or that does not exist, is refused alike.
    for hidden in ("acme/secret", "acme/nothing", "acme/cheap:9"):
        bad = world.admin.put("/api/endpoints/chat/degradation", json={"fallback": hidden})
        assert bad.status_code == 400, bad.text
        assert bad.json()["code"] == "degrade_fallback_not_callable"
    assert (
        world.admin.put(
            "/api/endpoints/chat/degradation", json={"priorities": ["urgent"]}
        ).status_code
        == 400
    )
    policy = {"queue_wait_seconds": 2.0, "fallback": "acme/cheap", "priorities": ["batch"]}
    put = world.admin.put("/api/endpoints/chat/degradation", json=policy)
    assert put.status_code == 200, put.text
    assert put.json()["policy"] == {**policy, "enabled": True, "tiers": None}

    assert served("batch") == "acme/cheap"  # this process routes by it at once
    # Interactive and (for this endpoint) offline calls keep the endpoint's version.
    assert served("interactive") == served("offline") == "acme/premium"
    # Under its threshold, batch calls are the endpoint's own again.
    waits.seconds["acme/premium"] = 1.5
    assert served("batch") == "acme/premium"
    # No fallback of its own: shed, saying when to come back.
    waits.seconds["acme/premium"] = 3.0
    world.admin.put("/api/endpoints/chat/degradation", json={"queue_wait_seconds": 2.0})

    with pytest.raises(openai.InternalServerError) as refused:
        call(world, "chat", priority="batch")
    assert refused.value.status_code == 503
    assert refused.value.response.headers["retry-after"] == "3"
    # Back to the installation's policy: nothing degrades.
    assert world.admin.delete("/api/endpoints/chat/degradation").json()["policy"] is None
    assert served("batch") == "acme/premium"
