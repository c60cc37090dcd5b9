"""Prometheus metrics of the serving layer and the prediction log, held by an instance.

Register them on the runtime's registry (``RuntimeMetrics.registry``) so one
``/metrics`` page shows everything.

Series:

- ``modelport_serving_attempts_total{backend,outcome}``: calls to a backend;
  ``outcome`` is ``ok``, ``failed``, ``overloaded``, ``refused`` (the request was
  invalid) or ``timeout``
- ``modelport_serving_fallbacks_total{endpoint,kind}``: answers (or explicit
  errors) given by a fallback step: ``version``, ``cache``, ``static``, ``unavailable``
- ``modelport_serving_breaker_state{backend}``: 0 closed, 1 half-open, 2 open
- ``modelport_serving_breaker_transitions_total{backend,to}``
- ``modelport_serving_backend_up{backend}``: 1 when the last health probe passed
- ``modelport_prediction_log_records_total{result}``: ``queued``, ``written``,
  ``dropped`` (buffer full: lost)
- ``modelport_prediction_log_detail_sampled_out_total``: records whose inputs and
  outputs were left out under buffer pressure (their audit fields were kept)
- ``modelport_prediction_log_buffer_depth``
- ``modelport_prediction_log_write_errors_total``

With several worker processes each has its own breakers, prober and log buffer; the
gauges' ``multiprocess_mode`` says how ``/metrics`` combines them (see ``multiprocess``).
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge

BREAKER_STATE_VALUE = {"closed": 0, "half_open": 1, "open": 2}


class ServingMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self._attempts: dict[tuple[str, str], Any] = {}
        self.attempts = Counter(
            "modelport_serving_attempts",
            "Calls to a backend by outcome.",
            ("backend", "outcome"),
            registry=r,
        )
        self.fallbacks = Counter(
            "modelport_serving_fallbacks",
            "Requests answered (or refused explicitly) by a fallback step, by kind.",
            ("endpoint", "kind"),
            registry=r,
        )
        self.breaker_state = Gauge(
            "modelport_serving_breaker_state",
            "Circuit breaker state: 0 closed, 1 half-open, 2 open.",
            ("backend",),
            registry=r,
            # The worst live worker: a breaker open in any of them fails some requests.
            multiprocess_mode="livemax",
        )
        self.breaker_transitions = Counter(
            "modelport_serving_breaker_transitions",
            "Circuit breaker state changes.",
            ("backend", "to"),
            registry=r,
        )
        self.backend_up = Gauge(
            "modelport_serving_backend_up",
            "1 when the backend's last health probe passed.",
            ("backend",),
            registry=r,
            # Every worker probes the same backend: the newest probe is the freshest answer.
            multiprocess_mode="livemostrecent",
        )
        self.log_records = Counter(
            "modelport_prediction_log_records",
            "Prediction log records: queued, written, or dropped because the buffer was full.",
            ("result",),
            registry=r,
        )
        self.log_detail_sampled_out = Counter(
            "modelport_prediction_log_detail_sampled_out",
            "Records whose inputs and outputs were left out under buffer pressure.",
            registry=r,
        )
        self.log_depth = Gauge(
            "modelport_prediction_log_buffer_depth",
            "Prediction log records waiting to be written.",
            registry=r,
            multiprocess_mode="livesum",  # one buffer per worker
        )
        self.log_write_errors = Counter(
            "modelport_prediction_log_write_errors",
            "Failed batch writes of the prediction log (retried).",
            registry=r,
        )

    def attempt(self, backend: str, outcome: str) -> None:
        # The labelled child kept: ``labels`` takes a lock and builds a key per call.
        child = self._attempts.get((backend, outcome))
        if child is None:
            child = self._attempts[backend, outcome] = self.attempts.labels(backend, outcome)
        child.inc()

    def fallback(self, endpoint: str, kind: str) -> None:
        self.fallbacks.labels(endpoint, kind).inc()

    def breaker(self, backend: str, state: str, *, changed: bool = True) -> None:
        self.breaker_state.labels(backend).set(BREAKER_STATE_VALUE[state])
        if changed:
            self.breaker_transitions.labels(backend, state).inc()

    def backend_health(self, backend: str, up: bool) -> None:
        self.backend_up.labels(backend).set(1 if up else 0)
