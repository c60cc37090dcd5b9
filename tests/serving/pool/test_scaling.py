"""The autoscaler's decision, as a table: one step moves a version's replicas by at
most one, within its deployments' bounds, on predicted queue wait, request rate and
idle time."""

from __future__ import annotations

import pytest

from modelport.serving.pool.scaling import Bounds, Demand, ScalePolicy, decide

POLICY = ScalePolicy(
    target_wait_seconds=0.5,
    target_rate_per_replica=10.0,
    scale_down_after_seconds=60.0,
    idle_seconds=900.0,
)


def demand(**fields: float) -> Demand:
    base: dict[str, float] = {
        "replicas": 2,
        "ready": 2,
        "wait_seconds": 0.3,
        "rate": 15.0,
        "idle_seconds": 1.0,
        "calm_seconds": 0.0,
    }
    base.update(fields)
    return Demand(
        replicas=int(base["replicas"]),
        ready=int(base["ready"]),
        wait_seconds=base["wait_seconds"],
        rate=base["rate"],
        idle_seconds=base["idle_seconds"],
        calm_seconds=base["calm_seconds"],
    )


@pytest.mark.parametrize(
    ("case", "given", "bounds", "expected"),
    [
        ("steady: wait under the target, rate carried", demand(), Bounds(1, 4), 2),
        ("wait past the target: one more", demand(wait_seconds=0.8), Bounds(1, 4), 3),
        ("wait far past the target: still one step", demand(wait_seconds=30), Bounds(1, 4), 3),
        ("wait past the target at max: held", demand(wait_seconds=0.8), Bounds(1, 2), 2),
        ("a replica still loading: not counted twice", demand(wait_seconds=0.8, ready=1),
         Bounds(1, 4), 2),
        ("rate needs more: one more", demand(rate=35.0), Bounds(1, 4), 3),
        ("rate needs more at max: held", demand(rate=35.0), Bounds(1, 2), 2),
        ("calm long enough, rate fits one fewer: one fewer",
         demand(wait_seconds=0.1, rate=5.0, calm_seconds=60.0), Bounds(1, 4), 1),
        ("calm not long enough: held",
         demand(wait_seconds=0.1, rate=5.0, calm_seconds=59.0), Bounds(1, 4), 2),
        ("calm, but one fewer could not carry the rate: held",
         demand(wait_seconds=0.1, rate=15.0, calm_seconds=600.0), Bounds(1, 4), 2),
        ("calm at min: held", demand(wait_seconds=0.0, rate=5.0, calm_seconds=600.0),
         Bounds(2, 4), 2),
        ("calm with min 0 but still called: never below one",
         demand(replicas=1, ready=1, wait_seconds=0.0, rate=0.1, calm_seconds=600.0),
         Bounds(0, 4), 1),
        ("idle: down to min", demand(replicas=3, idle_seconds=900.0), Bounds(1, 4), 1),
        ("idle with min 0: scaled to zero", demand(replicas=1, ready=1, idle_seconds=901.0),
         Bounds(0, 2), 0),
        ("at zero, still idle: stays at zero", demand(replicas=0, ready=0, idle_seconds=5000),
         Bounds(0, 2), 0),
        ("at zero, called again (woken): one", demand(replicas=0, ready=0, idle_seconds=0.0),
         Bounds(0, 2), 1),
        ("below min (bounds raised): up to min at once", demand(replicas=1, ready=1),
         Bounds(3, 4), 3),
        ("above max (bounds lowered): down to max at once", demand(replicas=4, ready=4),
         Bounds(1, 2), 2),
    ],
)  # fmt: skip
def test_decide(case: str, given: Demand, bounds: Bounds, expected: int) -> None:
    assert decide(given, bounds, POLICY) == expected, case


def test_without_a_rate_target_the_rate_alone_never_scales() -> None:
    policy = ScalePolicy(target_wait_seconds=0.5, target_rate_per_replica=None)
    assert decide(demand(rate=1000.0), Bounds(1, 4), policy) == 2
    calm = demand(wait_seconds=0.0, rate=1000.0, calm_seconds=600.0)
    assert decide(calm, Bounds(1, 4), policy) == 1
