"""Routing by need's plain part: preferences parsed strictly, candidates filtered with
their reasons and ordered by each preference, ties broken the same way every time."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from modelport.config import Settings
from modelport.errors import InvalidInput, NotFound, Unprocessable
from modelport.inference.route_facts import LatencyBoard, reference_price
from modelport.inference.task_routes import (
    Candidate,
    Prefer,
    Preferences,
    RouteTarget,
    no_candidate,
    rank,
    route_target,
)
from modelport.metering.types import PriceSnapshot, Unit

CHEAP = Candidate("a", "cheap", "1", price=10, latency_ms=80.0, score=0.4)
FAST = Candidate("a", "fast", "1", price=50, latency_ms=5.0, score=0.6)
GOOD = Candidate("b", "good", "2", price=900, latency_ms=None, score=0.95)
NEW = Candidate("b", "new", "1", price=20)  # never measured, never scored
ALL = [GOOD, NEW, CHEAP, FAST]


def names(preferences: Preferences) -> list[str]:
    return [c.name for c in rank(ALL, preferences).order]


def test_each_preference_orders_the_candidates() -> None:
    assert names(Preferences(prefer=Prefer.CHEAPEST)) == ["cheap", "new", "fast", "good"]
    assert names(Preferences(prefer=Prefer.FASTEST)) == ["fast", "cheap", "new", "good"]
    assert names(Preferences(prefer=Prefer.BEST)) == ["good", "fast", "cheap", "new"]


def test_filters_leave_candidates_out_with_their_reasons() -> None:
    ranked = rank(ALL, Preferences(max_price=60, max_latency_ms=50.0, min_score=0.5))
    assert [c.name for c in ranked.order] == ["fast"]
    reasons = {c.name: why for c, why in ranked.excluded}
    assert reasons == {
        "good": "price 900 is above max_price 60",
        "cheap": "latency 80.0 ms is above max_latency_ms 50.0",
        "new": "no verified leaderboard score",
    }
    # A candidate never measured passes a latency bound: it would never be tried else.
    assert "new" in [c.name for c in rank(ALL, Preferences(max_latency_ms=1)).order]


def test_a_metric_better_lower_is_weighed_the_right_way_round() -> None:
    low = Candidate("a", "low", "1", 1, score=0.2, higher_is_better=False)
    high = Candidate("a", "high", "1", 1, score=0.9, higher_is_better=False)
    assert [c.name for c in rank([high, low], Preferences()).order] == ["low", "high"]
    kept = rank([high, low], Preferences(min_score=0.5))
    assert [c.name for c in kept.order] == ["low"]


@pytest.mark.parametrize(
    "doc",
    [
        [],
        {"prefer": "loudest"},
        {"max_price": 1.5},
        {"max_price": True},
        {"max_price": -1},
        {"max_latency_ms": 0},
        {"min_score": "high"},
        {"min_score": float("nan")},
        {"colour": "red"},
    ],
)
def test_malformed_preferences_are_invalid_route(doc: Any) -> None:
    with pytest.raises(InvalidInput) as refused:
        route_target("route:chat", doc)
    assert refused.value.code == "invalid_route"


def test_a_task_alias_is_lower_case_and_bounded() -> None:
    assert route_target("route:chat", {"prefer": "fastest"}) == RouteTarget(
        "chat", Preferences(prefer=Prefer.FASTEST)
    )
    for bad in ("route:", "route:Chat", "route:a/b", "route:" + "x" * 65):
        with pytest.raises(InvalidInput):
            route_target(bad)


def test_no_candidate_is_404_with_none_callable_and_422_with_the_reasons() -> None:
    target = RouteTarget("chat", Preferences(max_price=1))
    assert isinstance(no_candidate(target, None), NotFound)
    refused = no_candidate(target, rank([CHEAP], target.preferences))
    assert isinstance(refused, Unprocessable) and refused.code == "route_no_candidate"
    assert refused.extra["reasons"] == [
        {"model": "a/cheap:1", "reason": "price 10 is above max_price 1"}
    ]


def test_the_reference_price_and_live_latency() -> None:
    prices = {
        Unit.PREDICTION: PriceSnapshot(1, 7),
        Unit.OUTPUT_TOKEN: PriceSnapshot(2, 30, per_units=1000),
    }
    assert reference_price(prices) == 7 + 30
    board = LatencyBoard(weight=0.5)
    assert board.live(NEW) is NEW
    board.observe("b/new", "1", 100.0)
    board.observe("b/new", "1", 50.0)
    assert board.live(NEW).latency_ms == 75.0


def test_degrade_fallbacks_are_checked_at_start() -> None:
    ok = Settings(degrade_queue_wait_seconds=2.0, degrade_fallbacks={"acme/big": "acme/small:2"})
    assert ok.serving.degrade_fallbacks == {"acme/big": "acme/small:2"}
    for bad in ({"big": "acme/small"}, {"acme/big:1": "acme/small"}, {"acme/big": "small"}):
        with pytest.raises(ValidationError):
            Settings(degrade_fallbacks=bad)
    with pytest.raises(ValidationError):
        Settings(degrade_queue_wait_seconds=0)
