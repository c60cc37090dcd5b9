"""What the sandbox ran, on ``/metrics``: the operator sees which isolation other people's
code actually got (``modelport_sandbox_runs_total``), and which mode is configured
(``modelport_sandbox_mode``)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

from modelport.sandbox import Finished


class SandboxMetrics:
    """The sandbox's series on ``registry``; ``observe`` is the sandbox's hook."""

    def __init__(self, registry: CollectorRegistry, mode: str) -> None:
        self.runs = Counter(
            "modelport_sandbox_runs",
            "Children run in the sandbox, by the isolation they got and how they ended.",
            ("isolation", "seccomp", "outcome"),
            registry=registry,
        )
        self.mode = Gauge(
            "modelport_sandbox_mode",
            "The configured sandbox mode (1 for the one in force).",
            ("mode",),
            registry=registry,
        )
        self.mode.labels(mode).set(1)

    def observe(self, finished: Finished) -> None:
        if finished.timed_out:
            outcome = "timeout"
        elif finished.returncode == 0:
            outcome = "exited"
        else:
            outcome = "failed"
        confinement = finished.confinement
        seccomp = "true" if confinement.seccomp else "false"
        self.runs.labels(confinement.isolation.value, seccomp, outcome).inc()
