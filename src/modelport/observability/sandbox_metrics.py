"""What the sandbox ran, on ``/metrics``: the operator sees which isolation other people's
code actually got (``modelport_sandbox_runs_total``), and which mode is configured
(``modelport_sandbox_mode``), and what caps a child's resources
(``modelport_sandbox_limits``: cgroup2, cgroup1 or rlimits)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

from modelport.sandbox import Finished


class SandboxMetrics:
    """The sandbox's series on ``registry``; ``observe`` is the sandbox's hook."""

    def __init__(self, registry: CollectorRegistry, mode: str, limits: str = "rlimits") -> None:
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
        self.limits = Gauge(
            "modelport_sandbox_limits",
            "What caps a sandboxed child's memory, CPU and processes (1 for the mechanism "
            "in force: cgroup2, cgroup1, or rlimits where no cgroup can be made).",
            ("mechanism",),
            registry=registry,
        )
        self.limits.labels(limits).set(1)

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
