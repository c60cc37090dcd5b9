"""Plain records of metering (frozen, no I/O): units, usage events, price rules, balances,
reservations, and the pure arithmetic of a charge.

Money is integers in micro-units of the currency (1 USD = 1,000,000), never floats.
A price is ``unit_price_micros`` per ``per_units`` units, so prices below one
micro-unit per unit are exact (1 micro per 1,000 tokens: ``unit_price_micros=1,
per_units=1000``). A charge is rounded down to the micro-unit (the caller never pays
for rounding); the remainder of a fraction is not carried between events.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

BPS = 10_000
"""Basis points in a whole (100%)."""


class Unit(StrEnum):
    """What a quantity counts."""

    PREDICTION = "prediction"
    """One inference call (a ``/v2`` infer request, whatever its batch of rows)."""
    INPUT_TOKEN = "input_token"
    OUTPUT_TOKEN = "output_token"
    IMAGE = "image"
    SECOND = "second"
    COMPUTE_MS = "compute_ms"
    """A millisecond of executor time attributed to the call."""
    CACHE_HIT = "cache_hit"
    """One call answered from the response cache. Where a version has a rule for it, a
    hit is charged by that rule alone; without one, a hit is priced as any call."""
    ROW = "row"
    """One row of a call's batch (dimension 0 of its inputs; a ``:predict`` instance):
    reserved for every row asked, charged for the rows answered."""


class UsageStatus(StrEnum):
    """How the work ended."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"
    """The caller went away; the quantity is what was done before it did."""


class FailureRule(StrEnum):
    """What a failed or timed-out call is charged (cancelled work is charged as done)."""

    NONE = "none"
    """Nothing."""
    FRACTION = "fraction"
    """``failure_bps`` basis points of the full amount."""
    FULL = "full"
    """The full amount."""


class BalanceScope(StrEnum):
    """What a prepaid balance (or spending allowance) belongs to."""

    TENANT = "tenant"
    KEY = "key"


class ReservationState(StrEnum):
    HELD = "held"
    SETTLED = "settled"
    RELEASED = "released"
    """Given back whole: the work never ran (refused, or nothing priced)."""
    EXPIRED = "expired"
    """Never settled (its process died): the sweeper gave the hold back."""


EVENT_SOURCE_INFERENCE = "modelport/v2"
"""``source`` of events metered on this server's own ``/v2`` path."""


@dataclass(frozen=True)
class PriceSnapshot:
    """The price rule that applied to one event, copied into it, so a charge never
    changes when the price book does. ``rule_id`` is None for an unpriced (free) call."""

    rule_id: int | None
    unit_price_micros: int
    per_units: int = 1
    failure_rule: FailureRule = FailureRule.NONE
    failure_bps: int = 0
    revenue_share_bps: int = 0
    """The publisher's share of the amount, in basis points."""

    def factor_bps(self, status: UsageStatus) -> int:
        """Basis points of the full amount charged for a call that ended in ``status``."""
        if status in (UsageStatus.SUCCEEDED, UsageStatus.CANCELLED):
            return BPS
        if self.failure_rule is FailureRule.FULL:
            return BPS
        if self.failure_rule is FailureRule.FRACTION:
            return self.failure_bps
        return 0

    def amount(self, quantity: int, status: UsageStatus = UsageStatus.SUCCEEDED) -> int:
        """The charge in micro-units, rounded down."""
        numerator = quantity * self.unit_price_micros * self.factor_bps(status)
        return numerator // (self.per_units * BPS)

    def publisher_share(self, amount: int) -> int:
        """The publisher's part of ``amount``, rounded down (the platform keeps the rest)."""
        return amount * self.revenue_share_bps // BPS


FREE = PriceSnapshot(rule_id=None, unit_price_micros=0)
"""The snapshot of a call whose version has no price for the unit: free."""


@dataclass(frozen=True)
class PriceRule:
    """One row of the price book: what a unit of a model's version costs from
    ``effective_from`` on (until a later rule for the same model, version and unit)."""

    id: int
    model: str
    """``owner/name``"""
    version: str | None
    """None: every version of the model that has no rule of its own for the unit."""
    unit: Unit
    unit_price_micros: int
    per_units: int
    revenue_share_bps: int
    failure_rule: FailureRule
    failure_bps: int
    effective_from: datetime
    created_at: datetime
    created_by: str

    @property
    def snapshot(self) -> PriceSnapshot:
        return PriceSnapshot(
            rule_id=self.id,
            unit_price_micros=self.unit_price_micros,
            per_units=self.per_units,
            failure_rule=self.failure_rule,
            failure_bps=self.failure_bps,
            revenue_share_bps=self.revenue_share_bps,
        )


@dataclass(frozen=True)
class NewPriceRule:
    """A price rule to add (``effective_from`` None: now)."""

    model: str
    unit: Unit
    unit_price_micros: int
    version: str | None = None
    per_units: int = 1
    revenue_share_bps: int | None = None
    """None: the platform's default share."""
    failure_rule: FailureRule = FailureRule.NONE
    failure_bps: int = 0
    effective_from: datetime | None = None


@dataclass(frozen=True)
class UsageEvent:
    """One metered unit of work: who did what on which artifact, how it ended, and what
    it costs. ``event_id`` is the idempotency key: the ledger keeps one event per id."""

    event_id: str
    tenant: str
    """Slug of the calling tenant (the principal id for the platform operator)."""
    key_id: str | None
    model: str
    """``owner/name`` of the version that actually ran."""
    version: str
    manifest_digest: str
    """The exact artifact that ran (``sha256:...``), or '' when the reporter did not say."""
    unit: Unit
    quantity: int
    status: UsageStatus
    started_at: datetime
    finished_at: datetime
    price: PriceSnapshot
    amount_micros: int
    """What the caller is charged for this event (``price.amount(quantity, status)``)."""
    publisher_micros: int
    """The publisher's share of ``amount_micros``."""
    endpoint: str | None = None
    task: str = ""
    compute_ms: float = 0.0
    """Executor time attributed to this call (its rows' share of its batch)."""
    gpu_ms: float = 0.0
    """Of ``compute_ms``, the GPU's time (0.0 on the CPU)."""
    wall_ms: float = 0.0
    request_id: str = ""
    prediction_id: str = ""
    source: str = EVENT_SOURCE_INFERENCE
    """Who reported it: this server's ``/v2`` path, or an external backend's URI."""
    reservation_id: str | None = None
    """Set when the charge was settled against a reservation (the balance was debited
    then); None when the ledger debits on insertion (reported usage)."""

    @property
    def publisher(self) -> str:
        """The tenant the model belongs to (statements attribute revenue to it)."""
        return self.model.split("/", 1)[0]


@dataclass(frozen=True)
class LedgerEntry:
    """An event as the ledger holds it: ``seq`` orders events by arrival (a billing
    watermark), ``recorded_at`` is when it arrived."""

    seq: int
    recorded_at: datetime
    event: UsageEvent


@dataclass(frozen=True)
class IngestResult:
    """What a batch delivery did: events newly recorded, and duplicates ignored."""

    inserted: tuple[str, ...] = ()
    duplicates: tuple[str, ...] = ()


@dataclass(frozen=True)
class Balance:
    """A prepaid balance of a tenant, or a spending allowance of one API key.

    Calls may spend down to ``-overdraft_micros``; in-flight calls hold
    ``reserved_micros`` of it until they settle.
    """

    scope: BalanceScope
    scope_id: str
    tenant: str
    balance_micros: int
    reserved_micros: int
    overdraft_micros: int
    updated_at: datetime

    @property
    def available_micros(self) -> int:
        return self.balance_micros - self.reserved_micros + self.overdraft_micros


@dataclass(frozen=True)
class Reservation:
    """Money held for one call before it runs, settled by its actual usage."""

    id: str
    tenant: str
    key_id: str | None
    amount_micros: int
    levels: tuple[str, ...]
    """What holds it: ``balance:tenant:<slug>``, ``balance:key:<id>``, ``budget:<slug>``."""
    state: ReservationState
    created_at: datetime
    expires_at: datetime
    settled_micros: int | None = None
    settled_at: datetime | None = None
    model: str | None = None
    """``owner/name`` the call was for: a remote backend may report usage of it against
    this reservation (its id is the call id)."""


@dataclass(frozen=True)
class Reporter:
    """Who reports a batch of usage (``MeteringService.ingest``): the principal's id,
    its tenant (None for the platform operator) and whether it is the platform admin."""

    id: str
    tenant: str | None
    is_admin: bool = False


@dataclass(frozen=True)
class UsageAuthorization:
    """A consumer's mandate: ``publisher`` may report ``consumer``'s usage of ``model``
    (None: any of the publisher's models) up to ``cap_micros`` in all, until
    ``expires_at`` (None: no end) or until it is withdrawn."""

    id: int
    consumer: str
    publisher: str
    model: str | None
    cap_micros: int
    spent_micros: int
    expires_at: datetime | None
    created_at: datetime
    created_by: str
    withdrawn_at: datetime | None = None
    withdrawn_by: str | None = None

    @property
    def remaining_micros(self) -> int:
        return max(0, self.cap_micros - self.spent_micros)

    def state(self, now: datetime) -> str:
        """``active``, ``withdrawn``, ``expired`` or ``exhausted``."""
        if self.withdrawn_at is not None:
            return "withdrawn"
        if self.expires_at is not None and self.expires_at <= now:
            return "expired"
        if self.spent_micros >= self.cap_micros:
            return "exhausted"
        return "active"


@dataclass(slots=True)
class CallInfo:
    """What metering needs to know about a call before it runs. Treat as immutable: it
    is not ``frozen`` because a frozen dataclass's ``__init__`` (``object.__setattr__``
    for each field) costs about 3 µs more, once per call on the event loop."""

    tenant: str
    key_id: str | None
    model: str
    version: str
    manifest_digest: str
    task: str = ""
    endpoint: str | None = None
    request_id: str = ""
    timeout_seconds: float = 30.0
    """The call's deadline, bounding time-priced units in the reservation."""
    quantities: dict[Unit, int] = field(default_factory=dict)
    """Upper bounds of count-priced units known up front (tokens asked for, images)."""
    call_id: str | None = None
    """A deterministic id for a call its caller may repeat (a job's stage run again after
    a crash): its prediction id, so its usage events' ids (``<call_id>:<unit>``) are the
    same each time, and the id of its hold (``meter.repeatable_id``), so it is charged
    once. None: a fresh random prediction id."""
    cached: bool = False
    """Answered from the response cache (``Unit.CACHE_HIT``)."""
    hold_id: str | None = None
    """A hold taken for the work this call is part of (a job's, ``jobs.billing``): a
    repeatable call draws its reservation from it (``Reservations.draw``) instead of
    holding anew, and holds anew only when it does not cover the call."""
    rows: int = 1
    """The request's rows (its batch dimension), the upper bound of ``row``: 1 for a
    call without a batch of rows (a stream, a single instance)."""


@dataclass(slots=True)
class Usage:
    """What one call used, in the platform's units; the meter prices and settles from it
    (``MeteredCall.record_usage``). Not ``frozen``, for the same reason as ``CallInfo``.

    ``rows``: rows of its batch that were answered (priced as ``row``); ``input_tokens``,
    ``output_tokens``, ``images``: counted units; ``seconds``: the call's wall time as
    measured by the service (the meter prices ``second`` from its own clock);
    ``cpu_ms`` / ``gpu_ms``: executor time attributed to the call where measured (its
    rows' share of its batch's execution); the ledger keeps their sum as ``compute_ms``
    and ``gpu_ms`` beside it, each priced per its device's second."""

    rows: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    images: int = 0
    seconds: float = 0.0
    cpu_ms: float = 0.0
    gpu_ms: float = 0.0

    def quantities(self) -> dict[Unit, int]:
        """The counted units that are not zero, by unit."""
        found: dict[Unit, int] = {}
        if self.input_tokens:
            found[Unit.INPUT_TOKEN] = self.input_tokens
        if self.output_tokens:
            found[Unit.OUTPUT_TOKEN] = self.output_tokens
        if self.images:
            found[Unit.IMAGE] = self.images
        return found
