"""Placement choice: pool, format, hardware, memory, spread, order."""

from __future__ import annotations

from modelport.serving.pool.choose import choose
from modelport.serving.pool.types import PlacedReplica, Wanted, WorkerInfo

MB = 1 << 20


def worker(name: str, memory: int | None = 100 * MB, **fields: object) -> WorkerInfo:
    base: dict[str, object] = {"formats": frozenset({"onnx"})}
    base.update(fields)
    return WorkerInfo(id=name, address=f"{name}:1", memory_bytes=memory, **base)  # type: ignore[arg-type]


def wanted(
    ref: str = "acme/a:1", memory: int = 10 * MB, replicas: int = 2, **fields: object
) -> Wanted:
    return Wanted(
        ref, "sha256:" + "0" * 64, fields.pop("format", "onnx"), memory, replicas, **fields
    )  # type: ignore[arg-type]


def test_replicas_go_to_distinct_workers_most_free_memory_first() -> None:
    workers = [worker("w1", 50 * MB), worker("w2", 200 * MB), worker("w3", 100 * MB)]
    choice = choose(wanted(), workers, {})
    assert choice.workers == ("w2", "w3")


def test_a_worker_already_holding_the_version_gets_no_second_replica() -> None:
    workers = [worker("w1"), worker("w2")]
    placed = {"w1": [PlacedReplica("acme/a:1", "d", "w1", memory_bytes=10 * MB)]}
    choice = choose(wanted(replicas=3), workers, placed)
    assert choice.workers == ("w2",)  # two workers: two replicas at most, never both on w1
    assert choose(wanted(replicas=1), workers, placed).workers == ()


def test_memory_already_budgeted_counts_against_a_worker() -> None:
    workers = [worker("w1", 30 * MB), worker("w2", 30 * MB)]
    placed = {"w1": [PlacedReplica("acme/b:1", "d", "w1", memory_bytes=25 * MB)]}
    choice = choose(wanted(replicas=2), workers, placed)
    assert choice.workers == ("w2",)
    assert "w1" in choice.refused and "free" in choice.refused["w1"]


def test_a_worker_without_a_budget_has_room_for_anything() -> None:
    choice = choose(wanted(memory=1 << 40, replicas=1), [worker("w1", None), worker("w2")], {})
    assert choice.workers == ("w1",)


def test_format_pool_and_hardware_filter_workers() -> None:
    workers = [
        worker("fmt", formats=frozenset({"sklearn"})),
        worker("pool", pool="gpu-pool"),
        worker("hw", accelerators=frozenset({"cuda"})),
        worker("ok"),
    ]
    choice = choose(wanted(replicas=4), workers, {})
    assert choice.workers == ("ok",)
    assert "format 'onnx'" in choice.refused["fmt"]
    assert "pool 'gpu-pool'" in choice.refused["pool"]
    assert "cpu" in choice.refused["hw"]
    gpu = choose(wanted(replicas=1, hardware=frozenset({"cuda"})), workers, {})
    assert gpu.workers == ("hw",)
    in_pool = choose(wanted(replicas=1, pool="gpu-pool"), workers, {})
    assert in_pool.workers == ("pool",)


def test_ties_spread_by_fewest_placements_then_id() -> None:
    workers = [worker("w2", None), worker("w1", None), worker("w3", None)]
    placed = {"w1": [PlacedReplica("acme/b:1", "d", "w1")]}
    assert choose(wanted(replicas=2), workers, placed).workers == ("w2", "w3")


def test_no_live_worker_says_so() -> None:
    choice = choose(wanted(), [], {})
    assert choice.workers == () and choice.reason == "no worker is live"
