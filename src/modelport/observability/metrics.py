"""Prometheus metrics of the runtime, held by an instance (never module globals).

``RuntimeMetrics`` owns a ``CollectorRegistry``; other components may register
their collectors on ``RuntimeMetrics.registry`` so one ``/metrics`` page shows
everything. It implements ``modelport.runtime.observer.RuntimeObserver``:
``version(model, version)`` returns an observer with every labelled child
resolved once, so recording on the hot path is a few additions.

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
- ``modelport_model_load_phase_duration_seconds{model,version,phase}``
- ``modelport_model_cold_starts_total{model,version}``
- ``modelport_model_memory_bytes{model,version,memory}`` (``host`` or ``device``)
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from modelport.observability.multiprocess import exposed

OUTCOMES = ("success", "invalid", "queue_full", "deadline_exceeded", "cancelled", "error")
LATENCY_BUCKETS = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
)  # fmt: skip
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
LOAD_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0)
CONTENT_TYPE = CONTENT_TYPE_LATEST


class VersionMetrics:
    """The labelled series of one version (implements ``VersionObserver``)."""

    def __init__(self, metrics: RuntimeMetrics, model: str, version: str) -> None:
        labels = (model, version)
        self._metrics = metrics
        self._labels = labels
        self._outcomes = {o: metrics.requests.labels(*labels, o) for o in OUTCOMES}
        self._latency = metrics.request_seconds.labels(*labels)
        self._queue = metrics.queue_seconds.labels(*labels)
        self._execute = metrics.execution_seconds.labels(*labels)
        self._batch = metrics.batch_size.labels(*labels)
        self._depth = metrics.queue_depth.labels(*labels)
        self._cold = metrics.cold_starts.labels(*labels)
        self._host = metrics.memory_bytes.labels(*labels, "host")
        self._device = metrics.memory_bytes.labels(*labels, "device")

    def request_done(self, outcome: str, seconds: float) -> None:
        counter = self._outcomes.get(outcome)
        if counter is None:
            counter = self._metrics.requests.labels(*self._labels, outcome)
        counter.inc()
        if outcome == "success":
            self._latency.observe(seconds)

    def queued(self, seconds: float) -> None:
        self._queue.observe(seconds)

    def batch_executed(self, size: int, seconds: float) -> None:
        self._batch.observe(size)
        self._execute.observe(seconds)

    def queue_depth(self, depth: int) -> None:
        self._depth.set(depth)

    def load_phase(self, phase: str, seconds: float) -> None:
        self._metrics.load_phase_seconds.labels(*self._labels, phase).observe(seconds)

    def cold_start(self) -> None:
        self._cold.inc()

    def memory(self, host_bytes: int, device_bytes: int) -> None:
        self._host.set(host_bytes)
        self._device.set(device_bytes)


class RuntimeMetrics:
    """The runtime's collectors on one registry (implements ``RuntimeObserver``)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        labels = ("model", "version")
        r = self.registry
        self.requests = Counter(
            "modelport_inference_requests",
            "Inference requests by outcome.",
            (*labels, "outcome"),
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
        self._versions: dict[tuple[str, str], VersionMetrics] = {}

    def version(self, model: str, version: str) -> VersionMetrics:
        found = self._versions.get((model, version))
        if found is None:
            found = self._versions.setdefault(
                (model, version), VersionMetrics(self, model, version)
            )
        return found


def render(registry: CollectorRegistry) -> bytes:
    """The Prometheus text exposition of ``registry``, or in multiprocess mode of every
    worker's metrics summed (``multiprocess.exposed``)."""
    return generate_latest(exposed(registry))
