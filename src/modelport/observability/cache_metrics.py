"""Prometheus metrics of the response cache (``modelport.inference.cache``).

Series:

- ``modelport_response_cache_total{result}``: lookups of calls of deterministic
  versions: ``hit``, ``miss``, or ``bypass`` (the caller's tenant declared no-cache)
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter

RESULTS = ("hit", "miss", "bypass")


class ResponseCacheMetrics:
    """Implements ``inference.cache.cache.CacheCounter``."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.lookups = Counter(
            "modelport_response_cache",
            "Response cache lookups by result: hit, miss, bypass (a no-cache tenant).",
            ("result",),
            registry=self.registry,
        )
        # Bound children, made once: a label lookup per call costs more than the count.
        self._children: dict[str, Any] = {r: self.lookups.labels(r) for r in RESULTS}

    def count(self, result: str) -> None:
        self._children[result].inc()
