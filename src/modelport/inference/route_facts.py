"""What the router weighs a task's candidates by: the catalog (which models serve the
task, at which default version), the price book, the leaderboards' verified scores,
and latency, live where this process has seen calls.

``CatalogRouteFacts.candidates`` is blocking (database reads): run it in a thread.
It lists every model of the task, whoever may call it: the router then keeps only
those the caller may call, through the one access rule (``inference.routed``). Its
answer is kept ``ttl`` seconds per task (a price or a score changed shows within it).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Protocol

from modelport.errors import NotFound
from modelport.inference.task_routes import Candidate
from modelport.metering.types import PriceSnapshot, Unit
from modelport.registry.catalog import MAX_LIMIT
from modelport.registry.service import RegistryService
from modelport.registry.types import CatalogQuery

MAX_CANDIDATES = 200
"""Models of one task weighed at most (the catalog's first page)."""

REFERENCE_CALL: Mapping[Unit, int] = {
    Unit.PREDICTION: 1,
    Unit.ROW: 1,
    Unit.INPUT_TOKEN: 1000,
    Unit.OUTPUT_TOKEN: 1000,
}
"""The call a candidate's price is the price of (``Candidate.price``)."""


@dataclass(frozen=True, slots=True)
class Score:
    """A version's leaderboard score on its task's metric."""

    value: float
    higher_is_better: bool
    latency_ms: float | None = None
    """The evaluation's measured mean latency per row."""


Prices = Callable[[str, str, datetime], Mapping[Unit, PriceSnapshot]]
Scores = Callable[[str], Mapping[tuple[str, str], Score]]
"""A task's verified scores by (``owner/name``, version)."""


class RouteFacts(Protocol):
    """The candidates of a task, weighed (``candidates``, blocking)."""

    def candidates(self, task: str) -> list[Candidate]: ...


def reference_price(prices: Mapping[Unit, PriceSnapshot]) -> int:
    """``REFERENCE_CALL``'s price at ``prices``, in micro-units."""
    total = 0
    for unit, count in REFERENCE_CALL.items():
        snapshot = prices.get(unit)
        if snapshot is not None:
            total += snapshot.unit_price_micros * count // max(1, snapshot.per_units)
    return total


class CatalogRouteFacts:
    """``RouteFacts`` over the registry, the price book and the leaderboards."""

    def __init__(
        self,
        registry: RegistryService,
        prices: Prices,
        scores: Scores,
        *,
        now: Callable[[], datetime],
        monotonic: Callable[[], float],
        ttl: float = 1.0,
    ) -> None:
        self.registry = registry
        self.prices = prices
        self.scores = scores
        self._now = now
        self._monotonic = monotonic
        self.ttl = ttl
        self._cached: dict[str, tuple[float, list[Candidate]]] = {}
        self._lock = threading.Lock()

    def candidates(self, task: str) -> list[Candidate]:
        with self._lock:
            cached = self._cached.get(task)
        if cached is not None and self._monotonic() < cached[0]:
            return cached[1]
        found = self._read(task)
        with self._lock:
            if len(self._cached) > 256:
                self._cached.clear()
            self._cached[task] = (self._monotonic() + self.ttl, found)
        return found

    def _read(self, task: str) -> list[Candidate]:
        page = self.registry.search(CatalogQuery(task=task, limit=min(MAX_LIMIT, MAX_CANDIDATES)))
        scores = self.scores(task)
        now = self._now()
        found = []
        for model in page.items:
            try:
                version = self.registry.resolve(model.owner, model.name, None)
            except NotFound:
                continue  # nothing to serve yet
            score = scores.get((model.ref, version.version))
            found.append(
                Candidate(
                    model.owner,
                    model.name,
                    version.version,
                    reference_price(self.prices(model.ref, version.version, now)),
                    None if score is None else score.latency_ms,
                    None if score is None else score.value,
                    True if score is None else score.higher_is_better,
                )
            )
        return found


class LatencyBoard:
    """Live latency per version: a moving average of the calls this process routed
    (time to the answer, or a stream's to its first chunk). Safe from any thread."""

    def __init__(self, weight: float = 0.2) -> None:
        self.weight = weight
        """How much the newest call counts."""
        self._ms: dict[tuple[str, str], float] = {}

    def observe(self, model: str, version: str, ms: float) -> None:
        key = (model, version)
        before = self._ms.get(key)
        self._ms[key] = ms if before is None else before + self.weight * (ms - before)

    def latency_ms(self, model: str, version: str) -> float | None:
        return self._ms.get((model, version))

    def live(self, candidate: Candidate) -> Candidate:
        """``candidate`` with its live latency, where this process measured one."""
        ms = self._ms.get((candidate.model, candidate.version))
        return candidate if ms is None else replace(candidate, latency_ms=ms)
