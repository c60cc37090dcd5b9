"""Prometheus metrics of the runtime, held by an instance (never module globals).

``RuntimeMetrics`` owns a ``CollectorRegistry``; other components may register
their collectors on ``RuntimeMetrics.registry`` so one ``/metrics`` page shows
everything. It implements ``modelport.runtime.observer.RuntimeObserver``:
``version(model, version)`` returns an observer with every labelled child
resolved once.

The per-request events (``request_done``, ``enqueued``, ``queued``, ``batch_executed``,
``queue_depth``) are tallied in plain Python (per version and per thread: counts per
outcome, histogram bucket counts and sums, the last queue depth) and folded into the
Prometheus children later, because a Prometheus ``inc``/``observe`` costs microseconds
(a lock, and in multiprocess mode a write to a shared file). They are folded:

- before every read of this process's registry (``render``, ``registry.collect()``,
  ``get_sample_value``): a scrape sees every observation made before it;
- in multiprocess mode, also periodically, so that a scrape landing on another worker
  sees this worker's values at most ``FOLD_INTERVAL`` (0.5 s) late while this worker's
  event loop runs: a recording call notices on a monotonic clock that the interval has
  passed and arms a one-shot timer on its event loop (no thread), which folds and keeps
  going while values keep coming. A recording call off any event loop folds at once
  when the interval has passed;
- when a version's memory is reported (after a load, and at unload, which includes the
  host's close), by ``RuntimeMetrics.flush()``, and at interpreter exit.

The rare events (loads, cold starts, memory) go to Prometheus at once.

With several worker processes (``multiprocess``), values live in shared files and
``render`` shows their sum over the workers; gauges say how they combine
(``multiprocess_mode``, ignored in one process). Two instances in one such process share
the series of equal name and labels.

Series (``model`` is ``owner/name``):

- ``modelport_inference_requests_total{model,version,outcome}``
- ``modelport_inference_request_duration_seconds{model,version}`` (in the runtime)
- ``modelport_inference_queue_duration_seconds{model,version}``
- ``modelport_inference_execution_duration_seconds{model,version}`` (per batch)
- ``modelport_inference_batch_size{model,version}`` (rows per executed batch)
- ``modelport_inference_queue_depth{model,version}``
- ``modelport_inference_queued_requests_total{model,version,priority}``: requests queued
  per class (``interactive``, ``batch``, ``offline``)
- ``modelport_model_load_phase_duration_seconds{model,version,phase}``
- ``modelport_model_cold_starts_total{model,version}``
- ``modelport_model_memory_bytes{model,version,memory}`` (``host`` or ``device``)
- ``modelport_model_worker_crashes_total{model,version,reason}`` (worker processes lost:
  ``crash``, or ``timeout`` when killed at a deadline)
- ``modelport_model_worker_starts_total{model,version}`` (worker processes started,
  restarts included)
"""

from __future__ import annotations

import asyncio
import atexit
import threading
import weakref
from asyncio import AbstractEventLoop
from bisect import bisect_left
from collections.abc import Iterable
from time import monotonic, time
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import CONTENT_TYPE_LATEST, choose_encoder

from modelport.observability.multiprocess import exposed, multiprocess_dir
from modelport.observability.types import Timed, VersionStatistics

OUTCOMES = ("success", "invalid", "queue_full", "deadline_exceeded", "cancelled", "error")
PRIORITIES = ("interactive", "batch", "offline")
LATENCY_BUCKETS = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
)  # fmt: skip
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
LOAD_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0)
CONTENT_TYPE = CONTENT_TYPE_LATEST
FOLD_INTERVAL = 0.5  # seconds: the most a multiprocess scrape lags a running worker

_INF = float("inf")
_LATENCY_BOUNDS = (*(float(b) for b in LATENCY_BUCKETS), _INF)
_BATCH_BOUNDS = (*(float(b) for b in BATCH_BUCKETS), _INF)
# (tally field, VersionMetrics attribute of its Prometheus child); the sum is FIELD_sum
_HISTOGRAMS = (
    ("latency", "_latency"),
    ("queue", "_queue"),
    ("rows", "_batch"),
    ("execute", "_execute"),
)


def _slot(bounds: tuple[float, ...], amount: Any) -> int:
    """The bucket prometheus_client's ``Histogram.observe`` increments: the first ``le``
    bound with ``amount <= bound``; ``len(bounds)`` (none) for NaN, which it counts in
    no bucket but adds to the sum."""
    i = bisect_left(bounds, amount)
    return i if i or amount <= bounds[0] else len(bounds)


class _Tally:
    """One thread's running totals of one version: only that thread writes them, and they
    only grow; a fold adds what grew since the last one (kept in a second ``_Tally``)."""

    __slots__ = (
        "enqueued", "execute", "execute_sum", "latency", "latency_sum", "outcomes",
        "queue", "queue_sum", "rows", "rows_sum", "thread",
    )  # fmt: skip

    def __init__(self, thread: threading.Thread | None) -> None:
        self.thread = thread
        self.outcomes = dict.fromkeys(OUTCOMES, 0)
        self.enqueued = dict.fromkeys(PRIORITIES, 0)
        # One slot per bucket, plus one for NaN (counted in no bucket).
        self.latency = [0] * (len(_LATENCY_BOUNDS) + 1)
        self.queue = [0] * (len(_LATENCY_BOUNDS) + 1)
        self.execute = [0] * (len(_LATENCY_BOUNDS) + 1)
        self.rows = [0] * (len(_BATCH_BOUNDS) + 1)
        self.latency_sum = self.queue_sum = self.execute_sum = self.rows_sum = 0.0


class _PerThread(threading.local):
    """``tally``: the calling thread's ``_Tally`` (made and registered on first use)."""

    def __init__(self, owner: VersionMetrics) -> None:
        self.tally = owner._new_tally()


class VersionMetrics:
    """The labelled series of one version (implements ``VersionObserver``).

    Thread-safe: each thread tallies on its own, and folds (under a lock) read those
    tallies and add their growth, so nothing is lost or counted twice.
    """

    def __init__(
        self, metrics: RuntimeMetrics, model: str, version: str, *, periodic: bool = False
    ) -> None:
        labels = (model, version)
        self._metrics = metrics
        self._labels = labels
        self._outcomes = {o: metrics.requests.labels(*labels, o) for o in OUTCOMES}
        self._enqueued = {p: metrics.queued_requests.labels(*labels, p) for p in PRIORITIES}
        self._latency = metrics.request_seconds.labels(*labels)
        self._queue = metrics.queue_seconds.labels(*labels)
        self._execute = metrics.execution_seconds.labels(*labels)
        self._batch = metrics.batch_size.labels(*labels)
        self._depth = metrics.queue_depth.labels(*labels)
        self._cold = metrics.cold_starts.labels(*labels)
        self._host = metrics.memory_bytes.labels(*labels, "host")
        self._device = metrics.memory_bytes.labels(*labels, "device")
        self._fold_lock = threading.Lock()
        self._tallies: list[tuple[_Tally, _Tally]] = []  # (running totals, folded so far)
        self._depth_value: float | None = None
        self._depth_folded: float | None = None
        # Periodic folds (multiprocess mode): ``_due`` on ``monotonic()``; the timer state
        # is guarded by ``_timer_lock``; ``_timer_at`` is 0.0 when none is pending.
        self._periodic = periodic
        self._due = 0.0
        self._timer_lock = threading.Lock()
        self._timer_at = 0.0
        self._timer_generation = 0
        self._last_done = 0.0  # wall clock of the last request_done (statistics)
        self._local = _PerThread(self)

    # ---- the hot path: plain Python, no lock
    def request_done(self, outcome: str, seconds: float) -> None:
        self._last_done = time()
        tally = self._local.tally
        counts = tally.outcomes
        if outcome in counts:
            counts[outcome] += 1
        else:  # an outcome outside OUTCOMES: its own series, at once (rare)
            self._metrics.requests.labels(*self._labels, outcome).inc()
        if outcome == "success":
            tally.latency[_slot(_LATENCY_BOUNDS, seconds)] += 1
            tally.latency_sum += seconds
        if self._periodic and monotonic() >= self._due:
            self._tick()

    def enqueued(self, priority: str) -> None:
        counts = self._local.tally.enqueued
        if priority in counts:
            counts[priority] += 1
        else:  # a class outside PRIORITIES: its own series, at once (rare)
            self._metrics.queued_requests.labels(*self._labels, priority).inc()

    def queued(self, seconds: float) -> None:
        tally = self._local.tally
        tally.queue[_slot(_LATENCY_BOUNDS, seconds)] += 1
        tally.queue_sum += seconds

    def batch_executed(self, size: int, seconds: float) -> None:
        tally = self._local.tally
        tally.rows[_slot(_BATCH_BOUNDS, size)] += 1
        tally.rows_sum += size
        tally.execute[_slot(_LATENCY_BOUNDS, seconds)] += 1
        tally.execute_sum += seconds
        if self._periodic and monotonic() >= self._due:
            self._tick()

    def queue_depth(self, depth: int) -> None:
        # what Gauge.set does: the same error for a bad value
        self._depth_value = depth if depth.__class__ is int else float(depth)
        if self._periodic and monotonic() >= self._due:
            self._tick()

    # ---- rare events: straight to Prometheus
    def load_phase(self, phase: str, seconds: float) -> None:
        self._metrics.load_phase_seconds.labels(*self._labels, phase).observe(seconds)

    def cold_start(self) -> None:
        self._cold.inc()

    def memory(self, host_bytes: int, device_bytes: int) -> None:
        self._host.set(host_bytes)
        self._device.set(device_bytes)
        self.fold()  # after a load and at unload (also the host's close): a natural point

    # ---- folding
    def fold(self) -> None:
        """Add every tally's growth since the last fold to the Prometheus children, and
        set the queue depth gauge to the last depth reported."""
        with self._fold_lock:
            for pair in list(self._tallies):
                tally = pair[0]
                # A thread seen dead before reading wrote its last values: fold, then drop.
                gone = tally.thread is not None and not tally.thread.is_alive()
                self._fold_tally(*pair)
                if gone:
                    self._tallies.remove(pair)
            depth = self._depth_value
            if depth is not None and depth != self._depth_folded:
                self._depth.set(depth)
                self._depth_folded = depth

    def statistics(self) -> VersionStatistics:
        """This process's figures of the version, every tally folded first."""
        self.fold()
        model, version = self._labels
        counts = {o: int(child._value.get()) for o, child in self._outcomes.items()}
        failed = sum(count for outcome, count in counts.items() if outcome != "success")
        return VersionStatistics(
            model=model,
            version=version,
            success=_timed(self._latency),
            fail=Timed(failed, 0),
            queue=_timed(self._queue),
            execution=_timed(self._execute),
            rows=int(self._batch._sum.get()),
            last_inference_ms=int(self._last_done * 1000),
        )

    def _fold_tally(self, tally: _Tally, folded: _Tally) -> None:
        seen = folded.outcomes
        for outcome, count in list(tally.outcomes.items()):
            if count != seen[outcome]:
                self._outcomes[outcome].inc(count - seen[outcome])
                seen[outcome] = count
        seen = folded.enqueued
        for priority, count in list(tally.enqueued.items()):
            if count != seen[priority]:
                self._enqueued[priority].inc(count - seen[priority])
                seen[priority] = count
        for field, child in _HISTOGRAMS:
            _fold_histogram(getattr(self, child), field, tally, folded)

    def _new_tally(self) -> _Tally:
        tally = _Tally(threading.current_thread())
        with self._fold_lock:
            self._tallies.append((tally, _Tally(None)))
        return tally

    def _tick(self) -> None:
        """The fold interval passed (multiprocess mode): have the values folded soon."""
        now = monotonic()
        self._due = now + FOLD_INTERVAL
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # a worker thread: no timer to set, fold now
            self.fold()
            return
        with self._timer_lock:
            # A pending timer folds soon; one long overdue was on a loop that stopped.
            if self._timer_at and self._timer_at + FOLD_INTERVAL > now:
                return
            self._arm(loop, FOLD_INTERVAL, now)

    def _arm(self, loop: AbstractEventLoop, delay: float, now: float) -> None:
        self._timer_generation += 1
        self._timer_at = now + delay
        loop.call_later(delay, self._on_timer, self._timer_generation)

    def _on_timer(self, generation: int) -> None:
        self.fold()
        with self._timer_lock:
            if generation != self._timer_generation:
                return  # superseded by a newer timer
            now = monotonic()
            if self._due > now:  # recorded since this timer was set: cover until then
                self._arm(asyncio.get_running_loop(), self._due - now, now)
            else:  # idle: the next recording call sets the next timer
                self._timer_at = 0.0


def _timed(child: Any) -> Timed:
    """A histogram child's count and sum (seconds) as a ``Timed``."""
    count = sum(bucket.get() for bucket in child._buckets)
    return Timed(int(count), int(child._sum.get() * 1e9))


def _fold_histogram(child: Any, field: str, tally: _Tally, folded: _Tally) -> None:
    # prometheus_client has no bulk observe: the child's bucket and sum values take the
    # growth directly (its count is the sum of its buckets).
    counts: list[int] = getattr(tally, field)
    seen: list[int] = getattr(folded, field)
    buckets = child._buckets
    for i in range(len(buckets)):  # the extra last slot (NaN) is in no bucket
        count = counts[i]
        if count != seen[i]:
            buckets[i].inc(count - seen[i])
            seen[i] = count
    sum_field = field + "_sum"
    total, seen_total = getattr(tally, sum_field), getattr(folded, sum_field)
    if total != seen_total:  # also a NaN total, which stays NaN as observe's sum would
        child._sum.inc(total - seen_total)
        setattr(folded, sum_field, total)


class _Folder:
    """Registered first on the registry: any collect folds the tallies before the series
    are read. Holds the metrics weakly (the registry must not keep them alive)."""

    def __init__(self, metrics: RuntimeMetrics) -> None:
        self._metrics = weakref.ref(metrics)

    def describe(self) -> Iterable[Any]:
        return ()

    def collect(self) -> Iterable[Any]:
        metrics = self._metrics()
        if metrics is not None:
            metrics.flush()
        return ()


_LIVE: weakref.WeakSet[RuntimeMetrics] = weakref.WeakSet()


def flush_all() -> None:
    """Fold every live ``RuntimeMetrics`` of this process (all share the files of a
    multiprocess scrape, and all must be folded at exit)."""
    for metrics in list(_LIVE):
        metrics.flush()


atexit.register(flush_all)


class RuntimeMetrics:
    """The runtime's collectors on one registry (implements ``RuntimeObserver``)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        # First, so that a collect folds the tallies before reading the series below.
        self.registry.register(_Folder(self))
        labels = ("model", "version")
        r = self.registry
        self.requests = Counter(
            "modelport_inference_requests",
            "Inference requests by outcome.",
            (*labels, "outcome"),
            registry=r,
        )
        self.queued_requests = Counter(
            "modelport_inference_queued_requests",
            "Requests queued, by priority class.",
            (*labels, "priority"),
            registry=r,
        )
        self.request_seconds = Histogram(
            "modelport_inference_request_duration_seconds",
            "Time successful requests spent in the runtime (queue and execution).",
            labels,
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.queue_seconds = Histogram(
            "modelport_inference_queue_duration_seconds",
            "Time requests waited in the queue before their batch started.",
            labels,
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.execution_seconds = Histogram(
            "modelport_inference_execution_duration_seconds",
            "Model execution time per batch.",
            labels,
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.batch_size = Histogram(
            "modelport_inference_batch_size",
            "Rows per executed batch.",
            labels,
            buckets=BATCH_BUCKETS,
            registry=r,
        )
        # Levels of the live workers add up: each has its own queues and loaded copies.
        self.queue_depth = Gauge(
            "modelport_inference_queue_depth",
            "Requests queued.",
            labels,
            registry=r,
            multiprocess_mode="livesum",
        )
        self.load_phase_seconds = Histogram(
            "modelport_model_load_phase_duration_seconds",
            "Duration of each load phase (fetch, verify, load, warmup).",
            (*labels, "phase"),
            buckets=LOAD_BUCKETS,
            registry=r,
        )
        self.cold_starts = Counter(
            "modelport_model_cold_starts",
            "Requests that found their version not loaded and loaded it.",
            labels,
            registry=r,
        )
        self.memory_bytes = Gauge(
            "modelport_model_memory_bytes",
            "Memory accounted to a loaded version.",
            (*labels, "memory"),
            registry=r,
            multiprocess_mode="livesum",
        )
        self.worker_crashes = Counter(
            "modelport_model_worker_crashes",
            "Worker processes lost: crashed, or killed at a deadline (timeout).",
            (*labels, "reason"),
            registry=r,
        )
        self.worker_starts = Counter(
            "modelport_model_worker_starts",
            "Worker processes started (restarts included).",
            labels,
            registry=r,
        )
        self._versions: dict[tuple[str, str], VersionMetrics] = {}
        # Other processes read this one's files: fold periodically too.
        self._periodic = multiprocess_dir() is not None
        _LIVE.add(self)

    def version(self, model: str, version: str) -> VersionMetrics:
        found = self._versions.get((model, version))
        if found is None:
            found = self._versions.setdefault(
                (model, version), VersionMetrics(self, model, version, periodic=self._periodic)
            )
        return found

    def statistics(self, model: str | None = None) -> list[VersionStatistics]:
        """The figures of every version this process has observed (of ``model``, an
        ``owner/name``, when given), sorted by model and version."""
        return [
            found.statistics()
            for (name, _), found in sorted(self._versions.items())
            if model is None or name == model
        ]

    def worker_crashed(self, model: str, version: str, reason: str) -> None:
        """Implements ``runtime.process.executor.WorkerObserver`` (a rare event)."""
        self.worker_crashes.labels(model, version, reason).inc()

    def worker_started(self, model: str, version: str) -> None:
        self.worker_starts.labels(model, version).inc()

    def flush(self) -> None:
        """Fold every version's tallies into the Prometheus series now."""
        for version in list(self._versions.values()):
            version.fold()


def render(registry: CollectorRegistry) -> bytes:
    """The Prometheus text exposition of ``registry``, or in multiprocess mode of every
    worker's metrics summed (``multiprocess.exposed``), this process's tallies folded first
    (the aggregate reads the files, not ``registry``)."""
    return exposition(registry)[0]


def exposition(registry: CollectorRegistry, accept: str = "") -> tuple[bytes, str]:
    """``render``'s page and its content type, in the format ``accept`` (a request's
    ``Accept`` header) asks for: OpenMetrics for ``application/openmetrics-text``, else
    the Prometheus text format."""
    shown = exposed(registry)
    if shown is not registry:
        flush_all()
    encode, content_type = choose_encoder(accept)
    return encode(shown), content_type
