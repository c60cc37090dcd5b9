"""Which rule prices a unit, asked of the price book's API (``GET /api/prices`` with
``version`` and ``at``): the meter's own choice, which the console quotes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from modelport.metering.prices import rules_in_effect
from modelport.metering.types import FailureRule, PriceRule, Unit
from tests.metering.conftest import Platform

T0 = datetime(2026, 12, 1, tzinfo=UTC)


def rule(ident: int, unit: Unit, micros: int, version: str | None, start: datetime) -> PriceRule:
    return PriceRule(
        id=ident,
        model="acme/adder",
        version=version,
        unit=unit,
        unit_price_micros=micros,
        per_units=1,
        revenue_share_bps=7000,
        failure_rule=FailureRule.NONE,
        failure_bps=0,
        effective_from=start,
        created_at=start,
        created_by="admin",
    )


def test_a_versions_rule_wins_and_the_latest_started_rule_applies() -> None:
    later = T0 + timedelta(days=10)
    rules = [
        rule(1, Unit.PREDICTION, 3000, None, T0),
        rule(2, Unit.PREDICTION, 5000, "2", T0),
        rule(3, Unit.OUTPUT_TOKEN, 8, "1", T0),
        rule(4, Unit.PREDICTION, 4000, None, later),
    ]
    at = T0 + timedelta(days=1)
    assert [r.id for r in rules_in_effect(rules, "1", at)] == [3, 1]  # by unit
    assert [r.id for r in rules_in_effect(rules, "2", at)] == [2]
    assert [r.id for r in rules_in_effect(rules, "1", later)] == [3, 4]
    assert [r.id for r in rules_in_effect(rules, "2", later)] == [2]  # its own still wins
    assert rules_in_effect(rules, "1", T0 - timedelta(seconds=1)) == []  # none started


def test_the_api_answers_the_rules_in_effect_for_a_version(platform: Platform) -> None:
    admin = platform.client
    now = datetime.now(UTC)
    soon = now + timedelta(days=1)
    for body in (
        {"unit": "prediction", "unit_price_micros": 3000},
        {"unit": "input_token", "unit_price_micros": 2, "version": "1"},
        {"unit": "prediction", "unit_price_micros": 4000, "effective_from": soon.isoformat()},
    ):
        created = admin.post("/api/prices", json={"model": "acme/adder", **body})
        assert created.status_code == 201, created.text

    def at(when: datetime, version: str = "1") -> list[tuple[Any, ...]]:
        answer = admin.get(
            "/api/prices",
            params={"model": "acme/adder", "version": version, "at": when.isoformat()},
        )
        assert answer.status_code == 200, answer.text
        items = answer.json()["items"]
        return [(i["unit"], i["unit_price_micros"], i["version"]) for i in items]

    # The first two took effect when created: after ``now``, by however long that took.
    created = datetime.now(UTC)
    assert at(created) == [("input_token", 2, "1"), ("prediction", 3000, None)]
    assert at(created, "2") == [("prediction", 3000, None)]
    assert at(soon + timedelta(seconds=1)) == [("input_token", 2, "1"), ("prediction", 4000, None)]
    # Unfiltered, the list still holds every rule.
    assert len(admin.get("/api/prices", params={"model": "acme/adder"}).json()["items"]) == 3


def test_a_time_needs_a_version_and_a_zone(platform: Platform) -> None:
    for params in (
        {"model": "acme/adder", "at": "2026-12-05T12:00:00+00:00"},
        {"model": "acme/adder", "version": "1", "at": "2026-12-05T12:00:00"},
    ):
        refused = platform.client.get("/api/prices", params=params)
        assert refused.status_code == 400 and refused.json()["code"] == "invalid_price"
    garbled = platform.client.get(
        "/api/prices", params={"model": "acme/adder", "version": "1", "at": "soon"}
    )
    assert garbled.status_code in (400, 422)
