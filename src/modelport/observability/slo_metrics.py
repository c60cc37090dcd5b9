"""The series the SLOs are read from (``slo``), held by an instance on the process's
registry (``RuntimeMetrics.registry``).

- ``modelport_endpoint_requests_total{endpoint,outcome}``: calls to an endpoint;
  ``outcome`` is ``ok``, ``error`` (the platform failed it: internal, unavailable,
  overloaded, past its deadline) or ``rejected`` (the caller's doing: invalid input,
  no access, a limit or budget reached, cancelled). Availability is ok / (ok + error).
- ``modelport_endpoint_request_duration_seconds{endpoint}``: the time of each ``ok``
  call, from the pipeline's start to its answer (a stream's: to its last chunk).
- ``modelport_job_duration_seconds{endpoint,state}``: an ended job's time from its
  submission to its end; ``endpoint`` is empty for a job on a model version.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram

from modelport.errors import ModelportError
from modelport.observability.deferred import Deferred
from modelport.observability.metrics import LATENCY_BUCKETS
from modelport.observability.slo import JOB_BUCKETS

OK, ERROR, REJECTED = "ok", "error", "rejected"
# What a failure's kind says of the platform: these are its own failures, the rest the
# caller's (a rate limit is a ``overloaded`` of its own code, the caller's: see below).
_PLATFORM_KINDS = frozenset({"internal", "unavailable", "deadline", "overloaded"})
CALLER_CODES = frozenset(
    {"rate_limited", "concurrency_limited", "quota_exceeded", "job_quota_exceeded"}
)


def outcome_of(exc: BaseException) -> str:
    """``error`` for a failure on the platform's side, ``rejected`` for the caller's."""
    if isinstance(exc, ModelportError):
        if exc.kind in _PLATFORM_KINDS and exc.code not in CALLER_CODES:
            return ERROR
        return REJECTED
    if isinstance(exc, Exception):
        return ERROR  # an unexpected failure is the platform's
    return REJECTED  # cancelled (the caller went away) or the process stopping


class SLIMetrics:
    """Implements the pipeline's ``CallObserver`` and the job runner's ``JobObserver``."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        # Endpoint calls are applied in batches (``deferred``): 2 series a call.
        self._deferred = Deferred(r, self._apply)
        self.requests = Counter(
            "modelport_endpoint_requests",
            "Calls to an endpoint by outcome: ok, error (the platform's), rejected (the caller's).",
            ("endpoint", "outcome"),
            registry=r,
        )
        self.duration = Histogram(
            "modelport_endpoint_request_duration_seconds",
            "Time of each successful call to an endpoint, to its answer or last chunk.",
            ("endpoint",),
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.jobs = Histogram(
            "modelport_job_duration_seconds",
            "Ended jobs' time from submission to end, by endpoint (empty: a version) and state.",
            ("endpoint", "state"),
            buckets=JOB_BUCKETS,
            registry=r,
        )
        # Labelled children kept: ``labels`` takes a lock and builds a key per call.
        self._children: dict[tuple[str, str], tuple[Any, Any]] = {}

    def endpoint_call(self, endpoint: str, outcome: str, seconds: float) -> None:
        self._deferred.record((endpoint, outcome, seconds))

    def _apply(self, calls: list[tuple[str, str, float]]) -> None:
        counts: dict[tuple[str, str], int] = {}
        for endpoint, outcome, seconds in calls:
            key = (endpoint, outcome)
            counts[key] = counts.get(key, 0) + 1
            if outcome == OK:
                self._children_of(key)[1].observe(seconds)
        for key, count in counts.items():
            self._children_of(key)[0].inc(count)

    def _children_of(self, key: tuple[str, str]) -> tuple[Any, Any]:
        found = self._children.get(key)
        if found is None:
            endpoint, outcome = key
            found = self._children[key] = (
                self.requests.labels(endpoint, outcome),
                self.duration.labels(endpoint) if outcome == OK else None,
            )
        return found

    def job_ended(self, endpoint: str, state: str, seconds: float) -> None:
        self.jobs.labels(endpoint, state).observe(max(seconds, 0.0))
