"""The monitors' findings on ``/metrics``: an alert rule reads these."""

from __future__ import annotations

from typing import Literal

from prometheus_client import CollectorRegistry, Gauge

from modelport.monitoring.types import MonitoringReport

_Mode = Literal["livemax", "livemin"]
_LABELS = ("endpoint", "model", "version", "arm")


class MonitoringMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        def gauge(name: str, doc: str, mode: _Mode, *extra: str) -> Gauge:
            return Gauge(
                f"modelport_monitoring_{name}",
                doc,
                (*_LABELS, *extra),
                registry=registry,
                multiprocess_mode=mode,
            )

        self.psi = gauge(
            "psi",
            "Population stability index of a feature (input, or output with the prefix "
            "'output:') of a version's answers in the current window against the reference.",
            "livemax",
            "feature",
        )
        self.drifted = gauge(
            "drifted_features",
            "Features of a version's answers that drifted past the monitor's limits.",
            "livemax",
        )
        self.accuracy = gauge(
            "accuracy",
            "Accuracy of a version's answers joined with outcomes, over the current window.",
            "livemin",
        )
        self.breach = gauge(
            "breach",
            "1 when a version is in breach of its endpoint's monitor (drift or accuracy).",
            "livemax",
        )

    def export(self, report: MonitoringReport) -> None:
        for version in report.versions:
            labels = (report.endpoint, version.model, version.version, version.arm or "")
            for drift in version.inputs:
                self.psi.labels(*labels, drift.feature).set(drift.psi)
            for drift in version.outputs:
                self.psi.labels(*labels, f"output:{drift.feature}").set(drift.psi)
            drifted = sum(d.drifted for d in [*version.inputs, *version.outputs])
            self.drifted.labels(*labels).set(drifted)
            overall = next((q for q in version.quality if q.slice is None), None)
            if overall is not None and overall.accuracy is not None:
                self.accuracy.labels(*labels).set(overall.accuracy)
            self.breach.labels(*labels).set(1 if version.in_breach else 0)
