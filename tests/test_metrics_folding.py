"""Tallied runtime metrics: what a read of the registry shows equals what calling
Prometheus directly on every event (the general path) shows, from one thread or many;
folds before every read, and periodically in multiprocess mode."""

from __future__ import annotations

import asyncio
import gc
import math
import re
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, Histogram, generate_latest

from modelport.observability import metrics as metrics_module
from modelport.observability.metrics import (
    BATCH_BUCKETS,
    LATENCY_BUCKETS,
    OUTCOMES,
    RuntimeMetrics,
    VersionMetrics,
    render,
)

MODEL, VERSION = "acme/mlp", "1"
LABELS = {"model": MODEL, "version": VERSION}


class DirectVersionMetrics:
    """The general path: every event straight to the Prometheus children (as before)."""

    def __init__(self, metrics: RuntimeMetrics) -> None:
        self.m = metrics
        self.labels = (MODEL, VERSION)

    def request_done(self, outcome: str, seconds: float) -> None:
        known = {o: self.m.requests.labels(*self.labels, o) for o in OUTCOMES}
        counter = known.get(outcome)  # an unhashable outcome fails here, as before
        if counter is None:
            counter = self.m.requests.labels(*self.labels, outcome)
        counter.inc()
        if outcome == "success":
            self.m.request_seconds.labels(*self.labels).observe(seconds)

    def queued(self, seconds: float) -> None:
        self.m.queue_seconds.labels(*self.labels).observe(seconds)

    def batch_executed(self, size: int, seconds: float) -> None:
        self.m.batch_size.labels(*self.labels).observe(size)
        self.m.execution_seconds.labels(*self.labels).observe(seconds)

    def queue_depth(self, depth: int) -> None:
        self.m.queue_depth.labels(*self.labels).set(depth)


def exposition(metrics: RuntimeMetrics) -> str:
    """The rendered page without its ``_created`` timestamps (they differ per instance)."""
    text = render(metrics.registry).decode()
    return "\n".join(line for line in text.splitlines() if "_created" not in line)


def pair() -> tuple[RuntimeMetrics, VersionMetrics, RuntimeMetrics, DirectVersionMetrics]:
    tallied, direct = RuntimeMetrics(), RuntimeMetrics()
    fast = tallied.version(MODEL, VERSION)
    slow = DirectVersionMetrics(direct)
    direct.version(MODEL, VERSION)  # the same children exist from the start on both
    return tallied, fast, direct, slow


def boundary_values(buckets: tuple[float, ...]) -> list[float]:
    values = [0.0, -0.0, -1.0, 1e-12, math.inf, -math.inf, 1e9]
    for bound in buckets:
        b = float(bound)
        values += [b, math.nextafter(b, math.inf), math.nextafter(b, -math.inf)]
    return values


def reference_buckets(buckets: tuple[float, ...], values: list[Any]) -> list[float]:
    """prometheus_client's own placement: cumulative bucket counts and the count."""
    histogram = Histogram("h", "h", buckets=buckets, registry=CollectorRegistry())
    for v in values:
        histogram.observe(v)
    return [s.value for s in histogram.collect()[0].samples if s.name in ("h_bucket", "h_count")]


def tallied_buckets(metrics: RuntimeMetrics, name: str) -> list[float]:
    family = {f.name: f for f in metrics.registry.collect()}[name]
    wanted = (f"{name}_bucket", f"{name}_count")
    return [s.value for s in family.samples if s.name in wanted]


def test_bucket_placement_equals_prometheus_clients() -> None:
    latency = boundary_values(LATENCY_BUCKETS)
    rows = [*boundary_values(tuple(map(float, BATCH_BUCKETS))), 0, 1, 3, 256, 257, True]
    metrics = RuntimeMetrics()
    version = metrics.version(MODEL, VERSION)
    for v in latency:
        version.request_done("success", v)
        version.queued(v)
    for v in rows:
        version.batch_executed(v, 0.001)
    expected = reference_buckets(LATENCY_BUCKETS, latency)
    for name in (
        "modelport_inference_request_duration_seconds",
        "modelport_inference_queue_duration_seconds",
    ):
        assert tallied_buckets(metrics, name) == expected
    assert tallied_buckets(metrics, "modelport_inference_batch_size") == reference_buckets(
        BATCH_BUCKETS, rows
    )


def test_nan_is_in_no_bucket_but_in_the_sum_as_with_prometheus() -> None:
    metrics = RuntimeMetrics()
    version = metrics.version(MODEL, VERSION)
    version.queued(0.001)
    version.queued(math.nan)
    name = "modelport_inference_queue_duration_seconds"
    assert tallied_buckets(metrics, name) == reference_buckets(LATENCY_BUCKETS, [0.001, math.nan])
    total = metrics.registry.get_sample_value(f"{name}_sum", LABELS)
    assert total is not None and math.isnan(total)
    version.queued(0.002)  # a NaN sum stays NaN, as observe's would
    total = metrics.registry.get_sample_value(f"{name}_sum", LABELS)
    assert total is not None and math.isnan(total)


def events() -> list[tuple[str, tuple[Any, ...]]]:
    seq: list[tuple[str, tuple[Any, ...]]] = []
    for i in range(300):
        seconds = (i % 37) * 0.0007
        seq.append(("queue_depth", (i % 5,)))
        seq.append(("queued", (seconds / 3,)))
        seq.append(("request_done", (OUTCOMES[i % len(OUTCOMES)], seconds)))
        if i % 7 == 0:
            seq.append(("batch_executed", (1 + i % 300, seconds * 2)))
    return seq


def apply(target: Any, seq: list[tuple[str, tuple[Any, ...]]]) -> list[str | None]:
    """Run the events; the type of the error each raised (None when it did not)."""
    raised: list[str | None] = []
    for method, args in seq:
        try:
            getattr(target, method)(*args)
        except Exception as exc:
            raised.append(type(exc).__name__)
        else:
            raised.append(None)
    return raised


def test_the_page_equals_the_direct_path_including_malformed_events() -> None:
    seq = [
        *events(),
        ("request_done", ("teapot", 0.01)),  # an outcome outside OUTCOMES
        ("request_done", ("success", "slow")),  # counted, then the observation fails
        ("request_done", ("success", None)),
        ("queued", ("x",)),
        ("queued", (None,)),
        ("batch_executed", ("many", 0.1)),
        ("batch_executed", (2, "x")),  # the size is observed before the time fails
        ("queue_depth", ("7",)),  # Gauge.set takes what float() takes
        ("queue_depth", (2.5,)),
        ("queue_depth", ("deep",)),
        ("queue_depth", (None,)),
        ("request_done", (["a"], 0.01)),
    ]
    tallied, fast, direct, slow = pair()
    raised = apply(fast, seq)
    assert raised == apply(slow, seq)
    assert raised.count(None) < len(raised)  # some did fail
    assert exposition(tallied) == exposition(direct)


def test_every_read_sees_every_observation_made_before_it() -> None:
    tallied, fast, direct, slow = pair()
    name = "modelport_inference_request_duration_seconds"
    for chunk in range(5):
        for i in range(50 * chunk + 1):
            for target in (fast, slow):
                target.request_done("success", i * 0.001)
                target.queue_depth(i)
        for suffix in ("_count", "_bucket"):
            labels = {**LABELS, "le": "0.01"} if suffix == "_bucket" else LABELS
            assert tallied.registry.get_sample_value(name + suffix, labels) == (
                direct.registry.get_sample_value(name + suffix, labels)
            )
        assert tallied.registry.get_sample_value(f"{name}_sum", LABELS) == pytest.approx(
            direct.registry.get_sample_value(f"{name}_sum", LABELS)
        )
        depth = "modelport_inference_queue_depth"
        assert tallied.registry.get_sample_value(depth, LABELS) == 50 * chunk
        assert b"modelport_inference_requests_total" in generate_latest(tallied.registry)


def run_threads(work: Callable[[], None], threads: int) -> None:
    """``work`` on ``threads`` new threads and this one, switching between them as often
    as the interpreter allows, so that a ``+=`` shared by threads would lose updates."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        workers = [threading.Thread(target=work) for _ in range(threads)]
        for t in workers:
            t.start()
        work()
        for t in workers:
            t.join()
    finally:
        sys.setswitchinterval(interval)


def test_threads_lose_nothing_and_count_nothing_twice() -> None:
    metrics = RuntimeMetrics()
    version = metrics.version(MODEL, VERSION)
    threads, per_thread = 8, 3000
    total = "modelport_inference_requests_total"
    stop = threading.Event()
    seen: list[float] = []

    def scrape() -> None:  # folds race the recording threads
        while not stop.is_set():
            seen.append(metrics.registry.get_sample_value(total, {**LABELS, "outcome": "success"}))

    def work() -> None:
        for i in range(per_thread):
            version.request_done("success", 0.001)
            version.request_done("error", 0.0)
            version.queued(0.002)
            version.batch_executed(1 + i % 3, 0.003)

    scraper = threading.Thread(target=scrape)
    scraper.start()
    try:
        run_threads(work, threads)
    finally:
        stop.set()
        scraper.join()

    n = (threads + 1) * per_thread
    read = metrics.registry.get_sample_value
    assert read(total, {**LABELS, "outcome": "success"}) == n
    assert read(total, {**LABELS, "outcome": "error"}) == n
    assert read("modelport_inference_request_duration_seconds_count", LABELS) == n
    assert read("modelport_inference_queue_duration_seconds_count", LABELS) == n
    assert read("modelport_inference_queue_duration_seconds_sum", LABELS) == pytest.approx(
        n * 0.002
    )
    assert read("modelport_inference_batch_size_count", LABELS) == n
    assert read("modelport_inference_batch_size_sum", LABELS) == (threads + 1) * sum(
        1 + i % 3 for i in range(per_thread)
    )
    assert seen == sorted(seen)  # a counter never went down
    # The finished threads' tallies were folded for the last time and dropped.
    assert [t.thread for t, _ in version._tallies] == [threading.current_thread()]


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[float]]:
    now = [1000.0]
    monkeypatch.setattr(metrics_module, "monotonic", lambda: now[0])
    yield now


def folded_successes(metrics: RuntimeMetrics) -> float:
    """The counter as Prometheus holds it now, without a registry read (which folds)."""
    (family,) = metrics.requests.collect()
    wanted = {**LABELS, "outcome": "success"}
    for s in family.samples:
        if s.name.endswith("_total") and s.labels == wanted:
            return s.value
    return 0.0


def periodic_version(metrics: RuntimeMetrics) -> VersionMetrics:
    """A version as multiprocess mode makes it (this process keeps values in memory)."""
    version = VersionMetrics(metrics, MODEL, VERSION, periodic=True)
    metrics._versions[(MODEL, VERSION)] = version
    return version


def test_off_a_loop_a_recording_call_folds_once_the_interval_passed(clock: list[float]) -> None:
    metrics = RuntimeMetrics()
    version = periodic_version(metrics)
    version.request_done("success", 0.01)  # the first call finds the time come
    assert folded_successes(metrics) == 1
    clock[0] += metrics_module.FOLD_INTERVAL / 2
    version.request_done("success", 0.01)
    version.queue_depth(4)
    assert folded_successes(metrics) == 1  # tallied, not folded yet
    clock[0] += metrics_module.FOLD_INTERVAL
    version.queue_depth(3)
    assert folded_successes(metrics) == 2
    (depth,) = metrics.queue_depth.collect()
    assert [s.value for s in depth.samples if s.labels["model"] == MODEL] == [3]


def test_one_process_folds_only_when_read(clock: list[float]) -> None:
    metrics = RuntimeMetrics()
    version = metrics.version(MODEL, VERSION)
    version.request_done("success", 0.01)
    clock[0] += 100
    version.request_done("success", 0.01)
    assert folded_successes(metrics) == 0
    assert (
        metrics.registry.get_sample_value(
            "modelport_inference_requests_total", {**LABELS, "outcome": "success"}
        )
        == 2
    )


def wait_for(check: Callable[[], bool], timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while not check() and time.monotonic() < deadline:
        time.sleep(0.01)
    return check()


def test_on_a_loop_a_timer_folds_what_came_last(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metrics_module, "FOLD_INTERVAL", 0.02)
    metrics = RuntimeMetrics()
    version = periodic_version(metrics)

    async def burst_then_idle(n: int, expected: int) -> None:
        for _ in range(n):
            version.request_done("success", 0.01)
        # No more recording calls: only the loop's timer can fold them.
        deadline = time.monotonic() + 30
        while folded_successes(metrics) != expected and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        assert folded_successes(metrics) == expected
        while version._timer_at and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        assert version._timer_at == 0.0  # idle: the timers stopped

    asyncio.run(burst_then_idle(3, 3))
    asyncio.run(burst_then_idle(2, 5))  # a new loop after the old one closed


def test_a_timer_left_on_a_closed_loop_does_not_stop_folding(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(metrics_module, "FOLD_INTERVAL", 0.02)
    metrics = RuntimeMetrics()
    version = periodic_version(metrics)

    async def record() -> None:
        version.request_done("success", 0.01)

    asyncio.run(record())  # arms a timer; the loop closes before it fires
    assert version._timer_at != 0.0
    time.sleep(0.05)  # the timer is now long overdue

    async def record_and_wait() -> None:
        version.request_done("success", 0.01)
        deadline = time.monotonic() + 30
        while folded_successes(metrics) != 2 and time.monotonic() < deadline:
            await asyncio.sleep(0.01)

    asyncio.run(record_and_wait())
    assert folded_successes(metrics) == 2


def test_unload_folds_the_version() -> None:
    metrics = RuntimeMetrics()
    version = metrics.version(MODEL, VERSION)
    version.request_done("success", 0.01)
    version.queue_depth(0)
    assert folded_successes(metrics) == 0
    version.memory(0, 0)  # what the host reports at unload and at close
    assert folded_successes(metrics) == 1


def test_render_folds_every_instance_of_the_process_in_multiprocess_mode(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    metrics = RuntimeMetrics()
    metrics.version(MODEL, VERSION).request_done("success", 0.01)
    shown = CollectorRegistry()
    monkeypatch.setattr(metrics_module, "exposed", lambda registry: shown)
    assert render(RuntimeMetrics().registry) == b""  # another instance's scrape
    assert folded_successes(metrics) == 1


def test_the_registry_does_not_keep_the_metrics_alive() -> None:
    metrics = RuntimeMetrics()
    registry = metrics.registry
    metrics.version(MODEL, VERSION).request_done("success", 0.01)
    assert re.search(rb'outcome="success".*\} 1\.0', generate_latest(registry))
    gone = weakref.ref(metrics)
    del metrics
    gc.collect()
    assert gone() is None
    assert re.search(rb'outcome="success".*\} 1\.0', generate_latest(registry))
