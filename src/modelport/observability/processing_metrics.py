"""Publishers' pre- and post-processing on ``/metrics``: calls by stage and outcome, their
duration, the sandboxed workers started (a rising count is code that keeps failing) and
those stopped while idle (``idle``, or ``idle_cpu``: code left running after its call)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class ProcessingMetrics:
    """The processing series on ``registry``."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.calls = Counter(
            "modelport_processing_calls",
            "Calls of a version's processing code, by stage (preprocess, postprocess) and "
            "outcome (ok, processing_failed, processing_timeout...).",
            ("model", "version", "stage", "outcome"),
            registry=registry,
        )
        self.seconds = Histogram(
            "modelport_processing_duration_seconds",
            "Time of a call of a version's processing code, by stage, as the server saw it "
            "(the round trip to its sandboxed worker included).",
            ("model", "version", "stage"),
            buckets=_BUCKETS,
            registry=registry,
        )
        self.workers = Counter(
            "modelport_processing_workers_started",
            "Sandboxed processing workers started, by version (a failed one is replaced).",
            ("model", "version"),
            registry=registry,
        )

        self.reaped = Counter(
            "modelport_processing_workers_reaped",
            "Idle processing workers stopped, by version and reason (idle: unused for the "
            "idle time; idle_cpu: killed for using CPU while serving no call).",
            ("model", "version", "reason"),
            registry=registry,
        )

    def call(self, model: str, version: str, stage: str, outcome: str, seconds: float) -> None:
        self.calls.labels(model, version, stage, outcome).inc()
        self.seconds.labels(model, version, stage).observe(seconds)

    def worker_started(self, model: str, version: str) -> None:
        self.workers.labels(model, version).inc()

    def worker_reaped(self, model: str, version: str, reason: str) -> None:
        self.reaped.labels(model, version, reason).inc()
