"""Memory admission: who is evicted, and when a load is refused."""

from __future__ import annotations

import pytest

from modelport.errors import Unavailable
from modelport.runtime.admission import (
    MemoryBudget,
    Resident,
    decayed_uses,
    keep_value,
    plan_admission,
)
from modelport.runtime.types import VersionKey

MB = 1 << 20


def resident(
    name: str,
    mb: int,
    *,
    evictable: bool = True,
    uses: float = 0.0,
    reload: float = 1.0,
    device_mb: int = 0,
) -> Resident:
    return Resident(
        key=VersionKey(f"o/{name}", "1", "sha256:" + "0" * 64),
        host_bytes=mb * MB,
        device_bytes=device_mb * MB,
        evictable=evictable,
        recent_uses=uses,
        reload_seconds=reload,
    )


def names(plan) -> list[str]:
    return [k.model.split("/")[1] for k in plan.evict]


def test_fits_without_evicting() -> None:
    plan = plan_admission(10 * MB, 0, [resident("a", 50)], MemoryBudget(100 * MB))
    assert plan.evict == ()


def test_unlimited_budget_never_evicts() -> None:
    assert plan_admission(10**15, 0, [resident("a", 50)], MemoryBudget(None)).evict == ()


def test_evicts_the_least_valuable_first_and_only_as_many_as_needed() -> None:
    residents = [
        resident("hot", 30, uses=50.0),
        resident("cold-cheap", 30, uses=0.0, reload=0.1),
        resident("cold-costly", 30, uses=0.0, reload=20.0),
    ]
    plan = plan_admission(30 * MB, 0, residents, MemoryBudget(100 * MB))
    assert names(plan) == ["cold-cheap"]
    plan = plan_admission(60 * MB, 0, residents, MemoryBudget(100 * MB))
    assert names(plan) == ["cold-cheap", "cold-costly"]


def test_larger_versions_go_first_at_equal_use() -> None:
    residents = [resident("small", 10), resident("large", 60)]
    plan = plan_admission(40 * MB, 0, residents, MemoryBudget(100 * MB))
    assert names(plan) == ["large"]


def test_pinned_or_busy_versions_are_never_evicted_and_nothing_is_evicted_on_refusal() -> None:
    residents = [resident("pinned", 60, evictable=False), resident("idle", 30)]
    with pytest.raises(Unavailable) as info:
        plan_admission(50 * MB, 0, residents, MemoryBudget(100 * MB))
    err = info.value
    assert err.code == "insufficient_memory"
    assert err.extra["needed_bytes"] == 50 * MB
    assert err.extra["budget_bytes"] == 100 * MB
    assert "o/pinned:1" in err.message


def test_a_version_larger_than_the_whole_budget_is_refused() -> None:
    with pytest.raises(Unavailable) as info:
        plan_admission(200 * MB, 0, [], MemoryBudget(100 * MB))
    assert info.value.code == "insufficient_memory"


def test_reserved_memory_of_abandoned_loads_counts() -> None:
    with pytest.raises(Unavailable):
        plan_admission(50 * MB, 0, [], MemoryBudget(100 * MB), reserved_host=60 * MB)


def test_device_memory_is_admitted_separately() -> None:
    residents = [resident("gpu", 10, device_mb=8), resident("cpu", 80)]
    plan = plan_admission(1 * MB, 4 * MB, residents, MemoryBudget(100 * MB, 10 * MB))
    assert names(plan) == ["gpu"]  # the large host-only version frees no device memory
    with pytest.raises(Unavailable) as info:
        plan_admission(1 * MB, 11 * MB, residents, MemoryBudget(100 * MB, 10 * MB))
    assert info.value.extra["memory"] == "device"


def test_use_counts_decay_over_time() -> None:
    assert decayed_uses(10.0, 0.0, 0.0) == 10.0
    assert decayed_uses(10.0, 0.0, 300.0) == pytest.approx(10.0 / 2.718281828, rel=1e-6)
    assert decayed_uses(0.0, 0.0, 5.0) == 0.0


def test_keep_value_grows_with_use_and_reload_cost_and_shrinks_with_size() -> None:
    base = keep_value(resident("a", 10))
    assert keep_value(resident("a", 10, uses=5)) > base
    assert keep_value(resident("a", 10, reload=10)) > base
    assert keep_value(resident("a", 100)) < base
