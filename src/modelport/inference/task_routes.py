"""Routing by need (no I/O): a call of a task alias (``route:chat``) rather than of one
model, with the caller's preferences, and the ordering of its candidates.

A ``RouteTarget`` names a task and carries ``Preferences``:

- ``max_price``: the most a reference call may cost, in micro-units (``Candidate.price``);
- ``max_latency_ms``: the most its live latency may be (a candidate never measured
  passes: it would otherwise never be tried);
- ``min_score``: the least leaderboard score it must have (for a task whose metric is
  better lower, the most); a candidate with no verified score fails it;
- ``prefer``: ``cheapest``, ``fastest`` or ``best`` (the default): the order the
  candidates that pass are tried in, the first answering.

``rank`` filters and orders; every candidate left out comes back with its reason, for
the 404/422 ``route_no_candidate`` that says why nothing matched.
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from modelport.errors import InvalidInput, ModelportError, NotFound, Unprocessable

ROUTE_PREFIX = "route:"
"""What a task alias starts with, on ``/v1``'s ``model`` and ``/v2``'s path."""

TASK_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")

NO_CANDIDATE = "route_no_candidate"
INVALID_ROUTE = "invalid_route"


class Prefer(enum.StrEnum):
    CHEAPEST = "cheapest"
    FASTEST = "fastest"
    BEST = "best"


@dataclass(frozen=True, slots=True)
class Preferences:
    """What the caller needs of the model that serves a routed call (module docstring)."""

    max_price: int | None = None
    max_latency_ms: float | None = None
    min_score: float | None = None
    prefer: Prefer = Prefer.BEST


@dataclass(frozen=True, slots=True)
class RouteTarget:
    """A task alias: the platform picks the model among those the caller may call."""

    task: str
    preferences: Preferences = Preferences()

    @property
    def name(self) -> str:
        return ROUTE_PREFIX + self.task


@dataclass(frozen=True, slots=True)
class Candidate:
    """One version that serves the task, as the router weighs it."""

    owner: str
    name: str
    version: str
    price: int
    """A reference call's price in micro-units: one prediction of one row with 1,000
    input and 1,000 output tokens, at the version's prices now."""
    latency_ms: float | None = None
    """Live: the recent calls' latency in this process, else the leaderboard's measured
    latency; None when never measured."""
    score: float | None = None
    """The version's best verified, published leaderboard score on the task's metric."""
    higher_is_better: bool = True

    @property
    def model(self) -> str:
        return f"{self.owner}/{self.name}"

    @property
    def ref(self) -> str:
        return f"{self.owner}/{self.name}:{self.version}"


@dataclass(frozen=True, slots=True)
class Ranked:
    """The candidates to try, in order, and those left out with their reasons."""

    order: tuple[Candidate, ...]
    excluded: tuple[tuple[Candidate, str], ...]


def is_route(name: str) -> bool:
    return name.startswith(ROUTE_PREFIX)


def route_target(name: str, preferences: Any = None) -> RouteTarget:
    """The route ``name`` (``route:<task>``) names, with ``preferences`` (a JSON object,
    or None) parsed; 400 ``invalid_route`` for either malformed."""
    task = name[len(ROUTE_PREFIX) :]
    if not TASK_RE.match(task):
        raise InvalidInput(
            f"'{name[:80]}' is not a task alias: route:<task>, the task in lower case",
            code=INVALID_ROUTE,
        )
    return RouteTarget(task, parse_preferences(preferences))


_FIELDS = ("max_price", "max_latency_ms", "min_score", "prefer")


def parse_preferences(doc: Any) -> Preferences:
    """``doc`` (a JSON object, or None for none) as ``Preferences``."""
    if doc is None:
        return Preferences()
    if not isinstance(doc, Mapping):
        raise _invalid("route preferences must be a JSON object")
    unknown = sorted(str(k) for k in doc if k not in _FIELDS)
    if unknown:
        raise _invalid(f"unknown route preferences {unknown}; known: {list(_FIELDS)}")
    max_price = doc.get("max_price")
    if max_price is not None and not (
        isinstance(max_price, int) and not isinstance(max_price, bool) and max_price >= 0
    ):
        raise _invalid("max_price must be a whole number of micro-units, at least 0")
    max_latency = _number(doc, "max_latency_ms")
    if max_latency is not None and max_latency <= 0:
        raise _invalid("max_latency_ms must be above 0")
    prefer = doc.get("prefer", Prefer.BEST.value)
    if prefer not in {p.value for p in Prefer}:
        raise _invalid(f"prefer must be one of {[p.value for p in Prefer]}")
    return Preferences(max_price, max_latency, _number(doc, "min_score"), Prefer(prefer))


def _number(doc: Mapping[str, Any], key: str) -> float | None:
    value = doc.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _invalid(f"{key} must be a finite number")
    return float(value)


def _invalid(message: str) -> InvalidInput:
    return InvalidInput(message, code=INVALID_ROUTE, param="route")


def rank(candidates: Sequence[Candidate], preferences: Preferences) -> Ranked:
    """The candidates that meet ``preferences``, best first by ``prefer``; the others
    with why."""
    kept: list[Candidate] = []
    excluded: list[tuple[Candidate, str]] = []
    for candidate in candidates:
        reason = _refusal(candidate, preferences)
        if reason is None:
            kept.append(candidate)
        else:
            excluded.append((candidate, reason))
    kept.sort(key=_order_key(preferences.prefer))
    return Ranked(tuple(kept), tuple(excluded))


def _refusal(candidate: Candidate, preferences: Preferences) -> str | None:
    if preferences.max_price is not None and candidate.price > preferences.max_price:
        return f"price {candidate.price} is above max_price {preferences.max_price}"
    latency, most = candidate.latency_ms, preferences.max_latency_ms
    if most is not None and latency is not None and latency > most:
        return f"latency {latency:.1f} ms is above max_latency_ms {most}"
    if preferences.min_score is not None:
        score = candidate.score
        if score is None:
            return "no verified leaderboard score"
        worse = (
            score < preferences.min_score
            if candidate.higher_is_better
            else (score > preferences.min_score)
        )
        if worse:
            return f"score {score} does not meet min_score {preferences.min_score}"
    return None


def _order_key(prefer: Prefer) -> Any:
    def latency(c: Candidate) -> float:
        return math.inf if c.latency_ms is None else c.latency_ms

    def goodness(c: Candidate) -> float:
        if c.score is None:
            return math.inf  # unscored: after every scored one
        return -c.score if c.higher_is_better else c.score

    if prefer is Prefer.CHEAPEST:
        return lambda c: (c.price, goodness(c), latency(c), c.ref)
    if prefer is Prefer.FASTEST:
        return lambda c: (latency(c), c.price, goodness(c), c.ref)
    return lambda c: (goodness(c), c.price, latency(c), c.ref)


def no_candidate(target: RouteTarget, ranked: Ranked | None) -> ModelportError:
    """404 ``route_no_candidate`` where no model the caller may call serves the task;
    422 where some do but none meets the preferences, with each one's reason."""
    if ranked is None or not ranked.excluded:
        return NotFound(
            f"no model you may call serves the task '{target.task}'",
            code=NO_CANDIDATE,
            reasons=[],
        )
    reasons = [{"model": c.ref, "reason": why} for c, why in ranked.excluded]
    listed = "; ".join(f"{r['model']}: {r['reason']}" for r in reasons)
    return Unprocessable(
        f"no model for the task '{target.task}' meets the preferences ({listed})",
        code=NO_CANDIDATE,
        reasons=reasons,
    )
