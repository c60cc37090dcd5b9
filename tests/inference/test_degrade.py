"""The degradation rule of a call: an endpoint's policy over the installation's, part by
part; tiers only where a tier source is wired; and tenants' tiers cached until changed."""

from __future__ import annotations

import anyio
import pytest

from modelport.clock import ManualClock
from modelport.inference.degrade import LOW_PRIORITIES, Degradation, Rule
from modelport.inference.tiers import TenantTiers
from modelport.runtime.types import Priority
from modelport.serving.endpoints.types import DegradePolicy
from modelport.serving.types import VersionRef
from modelport.tenancy.types import Tier


class NoWaits:
    def predicted_wait(self, version: VersionRef) -> float | None:
        return None


class Tiers:
    async def tier_of(self, tenant: str | None) -> Tier:
        return Tier.FREE


def test_an_endpoints_policy_overrides_the_installations_part_by_part() -> None:
    installed = Degradation(NoWaits(), 2.0, {"acme/big": "acme/small"}, tier_source=Tiers())
    assert installed.rule("acme/big") == Rule(
        2.0, "acme/small", LOW_PRIORITIES, frozenset({Tier.FREE})
    )
    assert installed.rule("acme/other") == Rule(2.0, None, LOW_PRIORITIES, frozenset({Tier.FREE}))
    own = DegradePolicy(queue_wait_seconds=0.5, priorities=[Priority.OFFLINE], tiers=[])
    assert installed.rule("acme/big", own) == Rule(
        0.5, "acme/small", frozenset({Priority.OFFLINE}), frozenset()
    )
    moved = DegradePolicy(fallback="acme/tiny:3", tiers=[Tier.FREE, Tier.STANDARD])
    assert installed.rule("acme/big", moved) == Rule(
        2.0, "acme/tiny:3", LOW_PRIORITIES, frozenset({Tier.FREE, Tier.STANDARD})
    )
    assert installed.rule("acme/big", DegradePolicy(enabled=False)) is None


def test_no_threshold_anywhere_degrades_nothing_and_no_tier_source_no_tier() -> None:
    off = Degradation(NoWaits(), None)
    assert off.rule("acme/big") is None
    assert off.rule("acme/big", DegradePolicy(fallback="acme/small")) is None
    endpoint = off.rule("acme/big", DegradePolicy(queue_wait_seconds=1.0, tiers=[Tier.FREE]))
    assert endpoint == Rule(1.0, None, LOW_PRIORITIES, frozenset())


def test_a_policy_is_checked_when_given() -> None:
    with pytest.raises(ValueError):
        DegradePolicy(fallback="not a model")
    with pytest.raises(ValueError):
        DegradePolicy(queue_wait_seconds=0)
    with pytest.raises(ValueError):
        DegradePolicy(tiers=["gold"])  # type: ignore[list-item]


def test_tiers_are_cached_until_forgotten_or_stale() -> None:
    clock = ManualClock()
    known = {"beta": Tier.FREE}
    loads: list[str] = []

    def load(slug: str) -> Tier | None:
        loads.append(slug)
        return known.get(slug)

    tiers = TenantTiers(load, ttl=5.0, clock=clock.monotonic)

    async def scenario() -> list[Tier]:
        seen = [await tiers.tier_of("beta"), await tiers.tier_of("gone")]
        known["beta"] = Tier.PREMIUM
        seen.append(await tiers.tier_of("beta"))  # cached
        tiers.forget("beta")
        seen.append(await tiers.tier_of("beta"))
        known["beta"] = Tier.STANDARD
        clock.advance(5.0)
        seen.append(await tiers.tier_of("beta"))  # stale: read again
        seen.append(await tiers.tier_of(None))  # the operator: never by tier
        return seen

    assert anyio.run(scenario) == [
        Tier.FREE,
        Tier.STANDARD,
        Tier.FREE,
        Tier.PREMIUM,
        Tier.STANDARD,
        Tier.PREMIUM,
    ]
    assert loads == ["beta", "gone", "beta", "beta"]
