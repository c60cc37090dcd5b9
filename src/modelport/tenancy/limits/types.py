"""Plain records of rate, concurrency and budget limits (frozen, no I/O)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from modelport.errors import Overloaded

MINUTE = 60.0


class ScopeType(StrEnum):
    """What a row of limits applies to."""

    TENANT = "tenant"
    """Every call of a tenant, all its keys together (``scope_id`` is the tenant slug)."""
    KEY = "key"
    """Every call made with one API key (``scope_id`` is the key id)."""
    MODEL = "model"
    """Calls of one model, set by its publisher, counted per calling tenant
    (``scope_id`` is ``owner/name``)."""


@dataclass(frozen=True)
class Limits:
    """One row of the ``limits`` table. ``None`` means not limited."""

    scope_type: ScopeType
    scope_id: str
    tenant: str | None
    """The tenant the scope belongs to (the key's or the model's owner), for authorization."""
    rpm: int | None
    """Requests per minute."""
    concurrency: int | None
    """Requests in flight at the same time."""
    tpm: int | None
    """Tokens per minute (generative models)."""
    updated_at: datetime
    updated_by: str
    jobs: int | None = None
    """A tenant's job quota: its jobs queued and running at once (tenant scope only)."""
    job_concurrency: int | None = None
    """A tenant's jobs running at once; the others wait queued (tenant scope only)."""


JOB_LIMITS = ("jobs", "job_concurrency")
"""The limits that apply to a tenant's jobs, not to calls: tenant scope only."""


@dataclass(frozen=True)
class Subject:
    """Who is calling what: the keys the limiter counts under."""

    tenant: str
    """The caller's tenant slug (the principal id when it has no tenant)."""
    key: str | None = None
    """The API key id, when the caller used one."""
    model: str | None = None
    """``owner/name`` of the model called, for inference."""


@dataclass(frozen=True)
class RateItem:
    """One allowance to charge: ``limit`` units per ``period`` seconds in bucket ``bucket``."""

    bucket: str
    limit: int
    period: float = MINUTE
    label: str = ""
    """What the allowance belongs to, for messages (``tenant acme``)."""

    def interval_us(self) -> int:
        """Microseconds one unit takes to come back (the GCRA emission interval)."""
        return max(1, int(self.period * 1_000_000) // self.limit)


@dataclass(frozen=True)
class RateDecision:
    """The answer of a rate limiter for a set of allowances charged together.

    ``limit``, ``remaining`` and ``reset_after`` describe the most restrictive
    allowance (the one with the fewest units left); they become the
    ``RateLimit-*`` response headers.
    """

    allowed: bool
    limit: int
    remaining: int
    reset_after: float
    """Seconds until that allowance is whole again."""
    retry_after: float = 0.0
    """Seconds to wait before the same charge can pass (0 when allowed)."""
    bucket: str | None = None
    label: str = ""


UNLIMITED = RateDecision(allowed=True, limit=0, remaining=0, reset_after=0.0)
"""The decision when no allowance applies (no ``RateLimit-*`` headers are sent)."""


@dataclass(frozen=True)
class SlotItem:
    """One concurrency allowance: at most ``limit`` leases at once in bucket ``bucket``."""

    bucket: str
    limit: int
    label: str = ""


@dataclass(frozen=True)
class Lease:
    """Slots held in a set of concurrency buckets, until released (or expired)."""

    id: str
    buckets: tuple[str, ...]


@dataclass(frozen=True)
class SlotDecision:
    """The answer of a concurrency limiter: a lease, or the allowance that is full."""

    lease: Lease | None
    refused: SlotItem | None = None


NOTHING_HELD = SlotDecision(Lease("", ()))
"""The admission of a call with no concurrency limit: a lease that holds no slot
(releasing it does nothing)."""


@dataclass(frozen=True)
class Budget:
    """A tenant's spending caps for the current period (integers in micro-units)."""

    tenant: str
    hard_cap_micros: int | None
    """Calls are refused (402 ``budget_exceeded``) once spending reaches this."""
    soft_cap_micros: int | None
    """An alert is recorded, once per period, when spending reaches this."""
    spent_micros: int
    """Spent in ``period`` (kept by metering)."""
    period: str
    """The calendar month (UTC) ``spent_micros`` belongs to, ``YYYY-MM``."""
    updated_at: datetime


@dataclass(frozen=True)
class BudgetAlert:
    id: int
    tenant: str
    period: str
    kind: str
    spent_micros: int
    cap_micros: int
    created_at: datetime


class RateLimited(Overloaded):
    """429 ``rate_limited``: carries the decision so the surface can send its headers."""

    default_code = "rate_limited"

    def __init__(self, message: str, decision: RateDecision, **extra: Any) -> None:
        super().__init__(message, retry_after=max(1, _ceil(decision.retry_after)), **extra)
        self.decision = decision


def _ceil(seconds: float) -> int:
    # A client told to come back after the whole second will not be refused again.
    whole = int(seconds)
    return whole if whole == seconds else whole + 1
