"""The price book: versions take part in pricing, changes take effect at their time and
never reprice what was charged before."""

from __future__ import annotations

from datetime import timedelta

import pytest

from modelport.errors import InvalidInput
from modelport.metering.types import FREE, FailureRule, NewPriceRule, Unit
from tests.metering.conftest import T0, Metering

P = Unit.PREDICTION


def rule(price: int, *, version: str | None = None, at=None, unit: Unit = P, **extra):
    return NewPriceRule(
        model="acme/adder",
        version=version,
        unit=unit,
        unit_price_micros=price,
        effective_from=at,
        **extra,
    )


def test_a_version_without_a_rule_is_free(metering: Metering) -> None:
    assert metering.prices.price("acme/adder", "1", P, T0) == FREE
    assert metering.prices.prices("acme/adder", "1", T0) == {}


def test_a_version_rule_wins_over_the_model_wide_one(metering: Metering) -> None:
    shared = metering.prices.add(rule(100), actor="t")
    own = metering.prices.add(rule(300, version="2"), actor="t")
    assert metering.prices.price("acme/adder", "1", P, T0).rule_id == shared.id
    assert metering.prices.price("acme/adder", "2", P, T0).rule_id == own.id
    assert metering.prices.price("acme/adder", "2", P, T0).unit_price_micros == 300
    assert metering.prices.price("acme/other", "1", P, T0) == FREE
    assert [r.id for r in metering.prices.list("acme/adder", version="1")] == [shared.id]


def test_a_price_change_takes_effect_at_its_time(metering: Metering) -> None:
    old = metering.prices.add(rule(100), actor="t")
    change = T0 + timedelta(days=10)
    new = metering.prices.add(rule(250, at=change), actor="t")
    before = metering.prices.price("acme/adder", "1", P, change - timedelta(microseconds=1))
    after = metering.prices.price("acme/adder", "1", P, change)
    assert (before.rule_id, before.unit_price_micros) == (old.id, 100)
    assert (after.rule_id, after.unit_price_micros) == (new.id, 250)


def test_a_rule_cannot_be_backdated(metering: Metering) -> None:
    with pytest.raises(InvalidInput, match="past"):
        metering.prices.add(rule(100, at=T0 - timedelta(hours=1)), actor="t")


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (rule(-1), "negative"),
        (rule(1, per_units=0), "per_units"),
        (rule(1, revenue_share_bps=10_001), "revenue_share_bps"),
        (rule(1, failure_rule=FailureRule.FRACTION, failure_bps=20_000), "failure_bps"),
        (NewPriceRule(model="adder", unit=P, unit_price_micros=1), "owner/name"),
    ],
)
def test_invalid_rules_are_refused(metering: Metering, bad: NewPriceRule, message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        metering.prices.add(bad, actor="t")
    assert metering.prices.list("acme/adder") == []


def test_the_platform_share_applies_unless_the_rule_sets_one(metering: Metering) -> None:
    assert metering.prices.add(rule(1), actor="t").revenue_share_bps == 7000
    assert metering.prices.add(rule(1, revenue_share_bps=9000), actor="t").revenue_share_bps == 9000


def test_the_failure_rule_is_part_of_the_rule(metering: Metering) -> None:
    added = metering.prices.add(
        rule(1000, failure_rule=FailureRule.FRACTION, failure_bps=2500), actor="t"
    )
    snapshot = metering.prices.price("acme/adder", "1", P, T0)
    assert snapshot.rule_id == added.id
    assert (snapshot.failure_rule, snapshot.failure_bps) == (FailureRule.FRACTION, 2500)
    # failure_bps means nothing for the other rules and is not kept
    full = metering.prices.add(rule(1, failure_rule=FailureRule.FULL, failure_bps=10), actor="t")
    assert full.failure_bps == 0
