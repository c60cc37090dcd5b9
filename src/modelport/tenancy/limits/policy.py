"""Which allowances apply to a call: limits rows, read through a short TTL cache.

A call by tenant ``t`` with key ``k`` to model ``m`` is counted in up to three
buckets per kind of limit: ``t``'s, ``k``'s, and ``m``'s for ``t`` (a model's
limits, set by its publisher, hold for each calling tenant separately). Rows
are cached for ``ttl_seconds``, so a changed limit reaches every gateway
within that time without a database read per call.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from modelport.tenancy.limits.repository import LimitRepository, Scope
from modelport.tenancy.limits.types import Limits, RateItem, ScopeType, SlotItem, Subject

INFER = "infer"
"""The inference surface (``/v2``, later ``/v1`` and endpoint predict)."""
API = "api"
"""The platform API (``/api``); counted apart so management never starves inference."""


class LimitPolicy:
    def __init__(
        self,
        repository: LimitRepository,
        *,
        ttl_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._repository = repository
        self._ttl = ttl_seconds
        self._clock = clock
        self._cache: dict[Scope, tuple[float, Limits | None]] = {}
        self._plans: dict[Subject, tuple[float, list[RateItem], list[SlotItem]]] = {}
        self._lock = threading.Lock()

    # ---- the allowances of a call

    def inference_items(
        self, subject: Subject, *, stale_ok: bool = False
    ) -> tuple[list[RateItem], list[SlotItem]]:
        """``rate_items(subject, INFER)`` and ``slot_items(subject)``, remembered per
        subject until the first of their rows goes stale: the hot path reads one dict.
        ``stale_ok``: a remembered answer past its time will do (a refresh is under way)."""
        plan = self._plans.get(subject)
        if plan is not None and (stale_ok or plan[0] > self._clock()):
            return plan[1], plan[2]
        return self._plan(subject)

    def _plan(self, subject: Subject) -> tuple[list[RateItem], list[SlotItem]]:
        rates, slots = self.rate_items(subject, INFER), self.slot_items(subject)
        with self._lock:
            expiry = [c[0] for s in _scopes(subject) if (c := self._cache.get(s)) is not None]
            if len(self._plans) > 10_000:
                self._plans.clear()  # bounded: subjects come and go
            self._plans[subject] = (min(expiry, default=0.0), rates, slots)
        return rates, slots

    def rate_items(self, subject: Subject, surface: str = INFER) -> list[RateItem]:
        """Requests-per-minute allowances; ``surface`` keeps /api and inference apart."""
        return [
            RateItem(f"{surface}:rpm:{bucket}", row.rpm, label=label)
            for bucket, label, row in self._scoped(subject, models=surface == INFER)
            if row.rpm is not None
        ]

    def token_items(self, subject: Subject) -> list[RateItem]:
        """Tokens-per-minute allowances (charged with the token count as cost)."""
        return [
            RateItem(f"tpm:{bucket}", row.tpm, label=label)
            for bucket, label, row in self._scoped(subject, models=True)
            if row.tpm is not None
        ]

    def slot_items(self, subject: Subject) -> list[SlotItem]:
        """Concurrency allowances of an inference call."""
        return [
            SlotItem(f"slots:{bucket}", row.concurrency, label=label)
            for bucket, label, row in self._scoped(subject, models=True)
            if row.concurrency is not None
        ]

    def _scoped(self, subject: Subject, *, models: bool) -> list[tuple[str, str, Limits]]:
        scopes: list[tuple[Scope, str, str]] = [
            ((ScopeType.TENANT, subject.tenant), f"tenant:{subject.tenant}", "tenant")
        ]
        if subject.key:
            scopes.append(((ScopeType.KEY, subject.key), f"key:{subject.key}", "API key"))
        if models and subject.model:
            model_bucket = f"model:{subject.model}:{subject.tenant}"
            scopes.append(((ScopeType.MODEL, subject.model), model_bucket, "model"))
        rows = self.limits([scope for scope, _, _ in scopes])
        scoped: list[tuple[str, str, Limits]] = []
        for scope, bucket, kind in scopes:
            row = rows.get(scope)
            if row is not None:
                scoped.append((bucket, f"{kind} {scope[1]}", row))
        return scoped

    # ---- the cache

    def limits(self, scopes: list[Scope]) -> dict[Scope, Limits | None]:
        """The rows of ``scopes`` (None where there is none), fresh within the TTL."""
        now = self._clock()
        found: dict[Scope, Limits | None] = {}
        missing: list[Scope] = []
        with self._lock:
            for scope in scopes:
                cached = self._cache.get(scope)
                if cached is not None and cached[0] > now:
                    found[scope] = cached[1]
                else:
                    missing.append(scope)
        if missing:
            loaded = self._repository.get_many(missing)
            expires = self._clock() + self._ttl
            with self._lock:
                for scope in missing:
                    found[scope] = loaded.get(scope)
                    self._cache[scope] = (expires, found[scope])
        return found

    def staleness(self, subject: Subject) -> float | None:
        """Seconds since the remembered plan of ``subject`` went stale (negative while
        fresh), or None when there is none."""
        plan = self._plans.get(subject)
        return None if plan is None else self._clock() - plan[0]

    def refresh(self, subject: Subject) -> None:
        """Read the rows of ``subject`` again and remember its plan anew (the old one
        serves until then). Blocking."""
        scopes = _scopes(subject)
        loaded = self._repository.get_many(scopes)
        expires = self._clock() + self._ttl
        with self._lock:
            for scope in scopes:
                self._cache[scope] = (expires, loaded.get(scope))
        self._plan(subject)

    def is_warm(self, subject: Subject) -> bool:
        """True when every row ``subject`` needs is cached and fresh (no database read)."""
        now = self._clock()
        plan = self._plans.get(subject)
        if plan is not None and plan[0] > now:
            return True
        with self._lock:
            return all(
                (c := self._cache.get(s)) is not None and c[0] > now for s in _scopes(subject)
            )

    def invalidate(self, scope: Scope | None = None) -> None:
        """Forget a cached row (after this process changed it) or all of them."""
        with self._lock:
            self._plans.clear()
            if scope is None:
                self._cache.clear()
            else:
                self._cache.pop(scope, None)


def _scopes(subject: Subject) -> list[Scope]:
    """The rows a call by ``subject`` is limited by."""
    scopes: list[Scope] = [(ScopeType.TENANT, subject.tenant)]
    if subject.key:
        scopes.append((ScopeType.KEY, subject.key))
    if subject.model:
        scopes.append((ScopeType.MODEL, subject.model))
    return scopes
