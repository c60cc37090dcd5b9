"""The limits on the request path: rate → concurrency → budget, then the work.

Typical use by a surface, after authentication::

    admission = limits.admit(Subject(tenant, key, model))   # raises 429 / 402
    try:
        ...work...
    finally:
        admission.release()
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from modelport.background.loops import BackgroundLoop
from modelport.errors import InvalidInput, NotFound, Overloaded
from modelport.tenancy.limits.budgets import BudgetGuard, BudgetRepository, DatabaseBudgetGuard
from modelport.tenancy.limits.interface import ConcurrencyLimiter, Gate, RateLimiter
from modelport.tenancy.limits.policy import API, LimitPolicy
from modelport.tenancy.limits.repository import LimitRepository
from modelport.tenancy.limits.types import (
    NOTHING_HELD,
    UNLIMITED,
    Budget,
    BudgetAlert,
    Lease,
    Limits,
    RateDecision,
    RateItem,
    RateLimited,
    ScopeType,
    SlotDecision,
    Subject,
)

if TYPE_CHECKING:
    from modelport.tenancy.limits.admitter import GroupAdmitter

STALE_LIMIT = 10
"""Cached rows past their TTL serve calls for at most this many TTLs while refreshing."""
_log = logging.getLogger(__name__)


MAX_CAP_MICROS = 10**18
"""A trillion currency units: a bound on a spending cap, below the 64-bit column's limit."""


class Admission:
    """A call let through: its rate decision (for the response headers) and the
    concurrency lease it holds until ``release`` (idempotent, thread-safe)."""

    def __init__(
        self, decision: RateDecision, lease: Lease | None, slots: ConcurrencyLimiter
    ) -> None:
        self.decision = decision
        self._lease = lease
        self._slots = slots
        self._lock = threading.Lock()

    def release(self) -> None:
        with self._lock:
            lease, self._lease = self._lease, None
        if lease is not None:
            self._slots.release(lease)


class LimitService:
    """Enforces the limits rows with a rate and a concurrency limiter, checks budgets,
    and manages both tables (changes made here are seen at once by this process, by
    other processes within ``cache_ttl_seconds``).

    ``blocking`` is True when a decision may wait on the network (Redis): async
    callers should then run ``admit``/``check_rate`` in a worker thread, or, for a
    subject whose rows are cached (``is_cached``), ``await admit_grouped`` when there
    is an ``admitter``.
    """

    def __init__(
        self,
        *,
        limits: LimitRepository,
        budgets: BudgetRepository,
        rates: RateLimiter,
        slots: ConcurrencyLimiter,
        cache_ttl_seconds: float,
        guard: BudgetGuard | None = None,
        gate: Gate | None = None,
        admitter: GroupAdmitter | None = None,
        blocking: bool = False,
        closers: Sequence[Callable[[], object]] = (),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.repository = limits
        self.budget_repository = budgets
        self.policy = LimitPolicy(limits, ttl_seconds=cache_ttl_seconds, clock=clock)
        self._guard = DatabaseBudgetGuard(budgets, ttl_seconds=cache_ttl_seconds, clock=clock)
        self.guard: BudgetGuard = guard or self._guard
        self.rates = rates
        self.slots = slots
        self.gate = gate
        self.admitter = admitter
        self.blocking = blocking
        self._closers = closers
        self._stale_limit = STALE_LIMIT * cache_ttl_seconds
        self._refreshing: set[Subject] = set()
        self._due: list[Subject] = []
        self._closed = False
        self._refresh_lock = threading.Lock()
        # One thread refreshes every stale subject in turn, woken when one is queued.
        self._refresher = BackgroundLoop("limits-refresh", self._refresh_due, None)

    def is_warm(self, subject: Subject) -> bool:
        """True when ``admit(subject, stale_ok=True)`` will not wait on I/O (an in-process
        limiter and cached rows), so an event loop may call it directly.

        Rows past their TTL still count, up to ``STALE_LIMIT`` TTLs, while one refresh
        per subject runs in the ``limits-refresh`` thread: a busy subject would otherwise send all its
        concurrent calls to the database at every expiry. A changed limit or budget
        therefore reaches this process within the TTL and one refresh.

        With a limiter over the network (Redis), only a subject with no rate or
        concurrency limit is warm: its admission asks the limiter nothing."""
        if not self.is_cached(subject):
            return False
        return not (self.blocking and any(self.policy.inference_items(subject, stale_ok=True)))

    def is_cached(self, subject: Subject) -> bool:
        """True when the subject's rows and budget need no database access (cached, at
        most ``STALE_LIMIT`` TTLs old, a refresh started when stale): ``admit_grouped``
        then waits on nothing but the limiter."""
        if self.guard is not self._guard:
            return False
        rows = self.policy.staleness(subject)
        budget = self._guard.staleness(subject.tenant)
        if rows is None or budget is None:
            return False
        if max(rows, budget) > self._stale_limit:
            return False
        if rows > 0 or budget > 0:
            self._refresh_soon(subject)
        return self._guard.is_warm(subject.tenant, stale_ok=True)

    def _refresh_soon(self, subject: Subject) -> None:
        with self._refresh_lock:
            if subject in self._refreshing or self._closed:
                return
            self._refreshing.add(subject)
            self._due.append(subject)
        self._refresher.start()
        self._refresher.kick()

    def _refresh_due(self) -> None:
        while True:
            with self._refresh_lock:
                if not self._due:
                    return
                subject = self._due.pop(0)
            try:
                self.policy.refresh(subject)
                self._guard.refresh(subject.tenant)
            except Exception:  # the next call past the stale limit reads them itself
                _log.exception("refreshing the limits of %s failed", subject)
            finally:
                with self._refresh_lock:
                    self._refreshing.discard(subject)

    def admit(self, subject: Subject, *, stale_ok: bool = False) -> Admission:
        """Let one inference call in, or raise: ``RateLimited`` (429 ``rate_limited``),
        ``Overloaded`` (429 ``concurrency_limited``, at once), ``PaymentRequired``
        (402 ``budget_exceeded``). The caller must ``release`` what it gets.
        ``stale_ok``: cached rows past their TTL will do (see ``is_warm``)."""
        rate_items, slot_items = self.policy.inference_items(subject, stale_ok=stale_ok)
        if self.gate is not None and (rate_items or slot_items):
            decision, maybe_slot = self.gate.admit(rate_items, 1, slot_items)
            self._raise_if_refused(decision, "requests")
            assert maybe_slot is not None
            slot = maybe_slot
        else:
            decision = self._charge(rate_items, 1, "requests")
            # No concurrency limit: nothing to hold, so the limiter is not asked (a
            # random lease id, and with Redis a round trip, for every unlimited call).
            slot = self.slots.acquire(slot_items) if slot_items else NOTHING_HELD
        admission = self._admission(decision, slot)
        try:
            if stale_ok and self.guard is self._guard:
                self._guard.check(subject.tenant, stale_ok=True)
            else:
                self.guard.check(subject.tenant)
        except BaseException:
            admission.release()
            raise
        return admission

    async def admit_on_loop(self, subject: Subject) -> Admission:
        """``admit`` for an event loop, never waiting on I/O there: on the loop when the
        subject's rows are cached and no limiter talks over the network, through the
        group ``admitter`` with Redis, else in a worker thread."""
        if self.is_warm(subject):
            return self.admit(subject, stale_ok=True)
        if self.admitter is not None and self.is_cached(subject):
            # Redis: batched with the other calls' admissions, no thread hop per call.
            return await self.admit_grouped(subject)
        return await asyncio.to_thread(self.admit, subject)

    async def admit_grouped(self, subject: Subject) -> Admission:
        """``admit(subject, stale_ok=True)`` for an event loop, its rate and slot decision
        sent through the group ``admitter`` (one Redis pipeline per batch of calls, no
        thread hop of its own); same order and refusals, then the budget. For a subject
        ``is_cached``; raises ``Unavailable`` (503) when Redis fails."""
        assert self.admitter is not None
        rate_items, slot_items = self.policy.inference_items(subject, stale_ok=True)
        if rate_items or slot_items:
            decision, maybe_slot = await self.admitter.admit(rate_items, 1, slot_items)
            self._raise_if_refused(decision, "requests")
            assert maybe_slot is not None
            slot = maybe_slot
        else:
            decision, slot = UNLIMITED, NOTHING_HELD
        admission = self._admission(decision, slot)
        try:
            if self._guard.is_warm(subject.tenant, stale_ok=True):
                self._guard.check(subject.tenant, stale_ok=True)
            else:  # dropped from the cache while this call waited, or an alert is due
                await asyncio.to_thread(self.guard.check, subject.tenant)
        except BaseException:
            admission.release()
            raise
        return admission

    def _admission(self, decision: RateDecision, slot: SlotDecision) -> Admission:
        if slot.lease is None:
            assert slot.refused is not None
            raise Overloaded(
                f"concurrency limit of {slot.refused.limit} requests in flight reached "
                f"for {slot.refused.label}",
                code="concurrency_limited",
                limit=slot.refused.limit,
                retry_after=1,
            )
        return Admission(decision, slot.lease, self.slots)

    def check_rate(self, subject: Subject, surface: str = API) -> RateDecision:
        """Charge one request on ``surface`` (the platform API by default) or raise
        ``RateLimited``."""
        return self._charge(self.policy.rate_items(subject, surface), 1, "requests")

    def charge_tokens(self, subject: Subject, tokens: int) -> RateDecision:
        """Charge ``tokens`` to the tokens-per-minute allowances or raise ``RateLimited``."""
        return self._charge(self.policy.token_items(subject), tokens, "tokens")

    def _charge(self, items: list[RateItem], cost: int, unit: str) -> RateDecision:
        if not items:
            return UNLIMITED
        decision = self.rates.hit(items, cost)
        self._raise_if_refused(decision, unit)
        return decision

    def _raise_if_refused(self, decision: RateDecision, unit: str) -> None:
        if not decision.allowed:
            raise RateLimited(
                f"rate limit of {decision.limit} {unit} per minute reached for "
                f"{decision.label}; retry after {decision.retry_after:.1f} s",
                decision,
                limit=decision.limit,
            )

    # ---- managing limits and budgets

    def set_limits(
        self,
        scope_type: ScopeType,
        scope_id: str,
        *,
        tenant: str | None,
        rpm: int | None,
        concurrency: int | None,
        tpm: int | None,
        actor: str,
        jobs: int | None = None,
        job_concurrency: int | None = None,
    ) -> Limits:
        """Replace the scope's row. ``jobs`` and ``job_concurrency`` limit a tenant's
        jobs (``jobs.service``, ``jobs.repository.claim``): a tenant scope's only."""
        values = (
            ("rpm", rpm),
            ("concurrency", concurrency),
            ("tpm", tpm),
            ("jobs", jobs),
            ("job_concurrency", job_concurrency),
        )
        for name, value in values:
            if value is not None and value < 1:
                raise InvalidInput(f"{name} must be at least 1 (or null: not limited)")
        if scope_type is not ScopeType.TENANT and (jobs, job_concurrency) != (None, None):
            raise InvalidInput(
                "jobs and job_concurrency limit a tenant's jobs: set them on its tenant scope",
                code="job_limits_tenant_only",
            )
        limits = self.repository.put(
            scope_type,
            scope_id,
            tenant=tenant,
            rpm=rpm,
            concurrency=concurrency,
            tpm=tpm,
            jobs=jobs,
            job_concurrency=job_concurrency,
            actor=actor,
        )
        self.policy.invalidate((scope_type, scope_id))
        return limits

    def get_limits(self, scope_type: ScopeType, scope_id: str) -> Limits:
        found = self.repository.get(scope_type, scope_id)
        if found is None:
            raise NotFound(
                f"no limits are set for {scope_type.value} {scope_id!r}", code="limits_not_found"
            )
        return found

    def list_limits(
        self, *, tenant: str | None = None, scope_type: ScopeType | None = None
    ) -> list[Limits]:
        return self.repository.list(tenant=tenant, scope_type=scope_type)

    def delete_limits(self, scope_type: ScopeType, scope_id: str) -> None:
        deleted = self.repository.delete(scope_type, scope_id)
        self.policy.invalidate((scope_type, scope_id))
        if not deleted:
            raise NotFound(
                f"no limits are set for {scope_type.value} {scope_id!r}", code="limits_not_found"
            )

    def set_budget(
        self, tenant: str, *, hard_cap_micros: int | None, soft_cap_micros: int | None
    ) -> Budget:
        for name, value in (
            ("hard_cap_micros", hard_cap_micros),
            ("soft_cap_micros", soft_cap_micros),
        ):
            if value is not None and not 0 <= value <= MAX_CAP_MICROS:
                raise InvalidInput(
                    f"{name} must be between 0 and {MAX_CAP_MICROS}",
                    code="invalid_request",
                    field=name,
                )
        budget = self.budget_repository.put(
            tenant, hard_cap_micros=hard_cap_micros, soft_cap_micros=soft_cap_micros
        )
        self._guard.invalidate(tenant)
        return budget

    def get_budget(self, tenant: str) -> Budget:
        found = self.budget_repository.get(tenant)
        if found is None:
            raise NotFound(f"tenant {tenant!r} has no budget", code="budget_not_found")
        return found

    def delete_budget(self, tenant: str) -> None:
        deleted = self.budget_repository.delete(tenant)
        self._guard.invalidate(tenant)
        if not deleted:
            raise NotFound(f"tenant {tenant!r} has no budget", code="budget_not_found")

    def add_spent(self, tenant: str, micros: int) -> Budget:
        """Record spending (metering calls this as it settles usage)."""
        budget = self.budget_repository.add_spent(tenant, micros)
        self._guard.invalidate(tenant)
        return budget

    def budget_alerts(self, tenant: str) -> list[BudgetAlert]:
        return self.budget_repository.alerts(tenant)

    def close(self) -> None:
        with self._refresh_lock:
            self._closed = True  # no refresher started again
        self._refresher.stop()
        if self.admitter is not None:
            self.admitter.close()
        self.slots.close()
        self.rates.close()
        for close in self._closers:
            close()
