"""Prometheus metrics of the HTTP surfaces, held by an instance (register them on the
runtime's registry, like ``ServingMetrics``, so one ``/metrics`` page shows everything).

Series:

- ``modelport_http_requests_total{method,route,status}``: every answered request, 401s
  and 400s included; ``route`` is the route's template (``/api/models/{owner}/{name}``),
  never the raw path, and ``unmatched`` for a path no route serves
- ``modelport_http_request_duration_seconds{method,route}``: from the request's arrival
  to the end of its answer's body (a stream's whole length)

``method`` is one of the HTTP methods the platform serves, else ``other``: label values
never come from what a client may choose freely.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram

from modelport.observability.metrics import LATENCY_BUCKETS

METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
UNMATCHED = "unmatched"


class HttpMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.requests = Counter(
            "modelport_http_requests",
            "HTTP requests answered, by method, route template and status.",
            ("method", "route", "status"),
            registry=self.registry,
        )
        self.duration = Histogram(
            "modelport_http_request_duration_seconds",
            "Time from a request's arrival to the end of its answer, by method and route.",
            ("method", "route"),
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        # Resolved children: ``labels()`` costs a lock and a tuple per call.
        self._counts: dict[tuple[str, str, int], Any] = {}
        self._durations: dict[tuple[str, str], Any] = {}

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        """Count one answered request and its duration."""
        if method not in METHODS:
            method = "other"
        count = self._counts.get((method, route, status))
        if count is None:
            count = self._counts.setdefault(
                (method, route, status), self.requests.labels(method, route, str(status))
            )
        count.inc()
        duration = self._durations.get((method, route))
        if duration is None:
            duration = self._durations.setdefault(
                (method, route), self.duration.labels(method, route)
            )
        duration.observe(seconds)
