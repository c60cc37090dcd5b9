"""The usage ledger: every usage event exactly once, however often it was delivered.

``record`` inserts a batch so that a redelivered or duplicated event is ignored and the
caller learns which ones were new. On PostgreSQL that is one ``INSERT ... SELECT FROM
jsonb_to_recordset ... ON CONFLICT (event_id) DO NOTHING RETURNING event_id``. On SQLite
it is one prepared single-row ``INSERT ... ON CONFLICT (event_id) DO NOTHING``
(``executemany``): a multi-row ``VALUES ... RETURNING`` is a new statement for SQLite
to compile at every batch size, and that compile cost more than the insert. Its row
count says how many rows were new: all of them is the usual case; otherwise the new
ones are the newest that many by ``seq`` (the transaction began with ``BEGIN
IMMEDIATE``, so no other writer comes between). SQLite rows are built straight from
the documents (``sqlite_row``: a timestamp in the meter's form becomes SQLite's
stored text by slicing); only a document in another form goes through ``event_row``
and SQLAlchemy's bind processors. Events that were not
settled against a reservation (usage reported by external backends) are charged to
the caller's balances and budget in the same transaction, for the new ones only.

Rows are appended and never changed; ``seq`` orders them by arrival, a watermark
for consumers such as billing.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Sequence
from datetime import date, datetime
from typing import Any

import orjson
from sqlalchemy import TextClause, func, select, text
from sqlalchemy.dialects import postgresql
from sqlalchemy.orm import Session

from modelport.metering.balances import debit, existing_levels, lock_order
from modelport.metering.outbox import EncodedEvent, event_doc
from modelport.metering.types import (
    FailureRule,
    IngestResult,
    LedgerEntry,
    PriceSnapshot,
    Unit,
    UsageEvent,
    UsageStatus,
)
from modelport.store import Database
from modelport.store.base import utcnow
from modelport.store.tables import UsageEventRow

_UNITS = {u.value: u.value for u in Unit}
_STATUSES = {s.value: s.value for s in UsageStatus}
_FAILURE_RULES = {r.value: r.value for r in FailureRule}


def event_row(doc: dict[str, Any], recorded_at: datetime) -> dict[str, Any]:
    """The ledger row of an event's document (``event_to_doc``): the usage journal hands
    the ledger documents, so rows are built from them, not from events. Raises KeyError
    or ValueError on a malformed document, as ``event_from_doc`` does."""
    model = doc["model"]
    return {
        "event_id": doc["event_id"],
        "tenant": doc["tenant"],
        "key_id": doc["key_id"],
        "model": model,
        "version": doc["version"],
        "manifest_digest": doc["manifest_digest"],
        "endpoint": doc.get("endpoint"),
        "task": doc.get("task", ""),
        "unit": _UNITS[doc["unit"]],
        "quantity": int(doc["quantity"]),
        "compute_ms": float(doc.get("compute_ms", 0.0)),
        "gpu_ms": float(doc.get("gpu_ms", 0.0)),
        "wall_ms": float(doc.get("wall_ms", 0.0)),
        "status": _STATUSES[doc["status"]],
        "started_at": datetime.fromisoformat(doc["started_at"]),
        "finished_at": datetime.fromisoformat(doc["finished_at"]),
        "request_id": doc.get("request_id", ""),
        "prediction_id": doc.get("prediction_id", ""),
        "price_rule_id": doc["price_rule_id"],
        "unit_price_micros": int(doc["price_unit_price_micros"]),
        "per_units": int(doc["price_per_units"]),
        "failure_rule": _FAILURE_RULES[doc["price_failure_rule"]],
        "failure_bps": int(doc["price_failure_bps"]),
        "revenue_share_bps": int(doc["price_revenue_share_bps"]),
        "amount_micros": int(doc["amount_micros"]),
        "publisher": model.split("/", 1)[0],
        "publisher_micros": int(doc["publisher_micros"]),
        "source": doc["source"],
        "reservation_id": doc.get("reservation_id"),
        "recorded_at": recorded_at,
    }


_TIMESTAMP = re.compile(
    r"((?!0000)[0-9]{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01]))"
    r"T((?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9])(\.[0-9]{6})?\+00:00"
)
"""A timestamp as the meter writes it: ``isoformat()`` of an aware UTC datetime."""


def sqlite_time(value: Any) -> str | None:
    """The text SQLAlchemy stores on SQLite for a timestamp in the meter's form
    (``YYYY-MM-DD HH:MM:SS.ffffff``), by slicing instead of parsing and formatting; None
    for any other form (another offset, no offset, an impossible date), which the
    general path parses or refuses."""
    if type(value) is not str:
        return None
    match = _TIMESTAMP.fullmatch(value)
    if match is None:
        return None
    day, clock, fraction = match.groups()
    if day[8:] > "28" and not _real_day(day):  # the pattern lets 31 February through
        return None
    return f"{day} {clock}{fraction or '.000000'}"


def _real_day(day: str) -> bool:
    try:
        date.fromisoformat(day)
    except ValueError:
        return False
    return True


def sqlite_row(doc: dict[str, Any], recorded_at: str) -> tuple[Any, ...] | None:
    """The SQLite bind values of an event's document, in ``_COLUMNS`` order: the values
    ``event_row`` and the columns' bind processors give, without the dict and the
    datetime round trip. None when a timestamp is not in the meter's form; raises on a
    malformed document (the caller then takes the general path, which raises as before).
    ``recorded_at`` is already SQLite's text."""
    started_at = sqlite_time(doc["started_at"])
    finished_at = sqlite_time(doc["finished_at"])
    if started_at is None or finished_at is None:
        return None
    model = doc["model"]
    get = doc.get
    return (
        doc["event_id"],
        doc["tenant"],
        doc["key_id"],
        model,
        doc["version"],
        doc["manifest_digest"],
        get("endpoint"),
        get("task", ""),
        _UNITS[doc["unit"]],
        int(doc["quantity"]),
        float(get("compute_ms", 0.0)),
        float(get("gpu_ms", 0.0)),
        float(get("wall_ms", 0.0)),
        _STATUSES[doc["status"]],
        started_at,
        finished_at,
        get("request_id", ""),
        get("prediction_id", ""),
        doc["price_rule_id"],
        int(doc["price_unit_price_micros"]),
        int(doc["price_per_units"]),
        _FAILURE_RULES[doc["price_failure_rule"]],
        int(doc["price_failure_bps"]),
        int(doc["price_revenue_share_bps"]),
        int(doc["amount_micros"]),
        model.split("/", 1)[0],
        int(doc["publisher_micros"]),
        doc["source"],
        get("reservation_id"),
        recorded_at,
    )


def entry_of(row: UsageEventRow) -> LedgerEntry:
    """A ledger row as a plain record."""
    event = UsageEvent(
        event_id=row.event_id,
        tenant=row.tenant,
        key_id=row.key_id,
        model=row.model,
        version=row.version,
        manifest_digest=row.manifest_digest,
        unit=Unit(row.unit),
        quantity=row.quantity,
        status=UsageStatus(row.status),
        started_at=row.started_at,
        finished_at=row.finished_at,
        price=PriceSnapshot(
            rule_id=row.price_rule_id,
            unit_price_micros=row.unit_price_micros,
            per_units=row.per_units,
            failure_rule=FailureRule(row.failure_rule),
            failure_bps=row.failure_bps,
            revenue_share_bps=row.revenue_share_bps,
        ),
        amount_micros=row.amount_micros,
        publisher_micros=row.publisher_micros,
        endpoint=row.endpoint,
        task=row.task,
        compute_ms=row.compute_ms,
        gpu_ms=row.gpu_ms,
        wall_ms=row.wall_ms,
        request_id=row.request_id,
        prediction_id=row.prediction_id,
        source=row.source,
        reservation_id=row.reservation_id,
    )
    return LedgerEntry(seq=row.seq, recorded_at=row.recorded_at, event=event)


def _postgres_insert() -> TextClause:
    """The batch as one JSON parameter on PostgreSQL: a multi-row VALUES with thousands
    of bound parameters costs more to build on the client than to run on the server."""
    table = UsageEventRow.__table__
    dialect = postgresql.dialect()
    columns = [c for c in table.columns if c.name != "seq"]
    names = ", ".join(c.name for c in columns)
    shape = ", ".join(f"{c.name} {c.type.compile(dialect=dialect)}" for c in columns)
    return text(
        f"INSERT INTO usage_events ({names}) "
        f"SELECT {names} FROM jsonb_to_recordset(CAST(:rows AS jsonb)) AS r({shape}) "
        "ON CONFLICT (event_id) DO NOTHING RETURNING event_id"
    )


_COLUMNS = [c for c in UsageEventRow.__table__.columns if c.name != "seq"]
_NAMES = [c.name for c in _COLUMNS]
_SQLITE_INSERT = (
    f"INSERT INTO usage_events ({', '.join(_NAMES)}) "
    f"VALUES ({', '.join('?' * len(_COLUMNS))}) ON CONFLICT (event_id) DO NOTHING"
)
_SQLITE_LATEST = "SELECT event_id FROM usage_events ORDER BY seq DESC LIMIT ?"
_EVENT_ID, _TENANT, _KEY_ID, _AMOUNT, _RESERVATION = (
    _NAMES.index(name)
    for name in ("event_id", "tenant", "key_id", "amount_micros", "reservation_id")
)

_TURN = text("SELECT pg_advisory_xact_lock(7426001)")
"""The ledger writers' turn on PostgreSQL (held until commit); the number is the
ledger's own, taken by nothing else."""

Charge = tuple[str, str | None, int]
"""What a new event owes: its tenant, key and amount."""


class Ledger:
    """Appends usage events, deduplicated by ``event_id``; reads them back."""

    def __init__(self, database: Database, *, now: Callable[[], datetime] = utcnow) -> None:
        self._db = database
        self._now = now
        self._insert = _postgres_insert() if database.dialect == "postgresql" else None
        # How each column's value is stored (UTC datetimes as SQLite's text), worked out
        # once for the general path: the rows then go to the driver without SQLAlchemy's
        # per-row work. The dialect's own type, so a datetime is formatted as SQLAlchemy
        # stores it everywhere else, not left to the driver's adapter.
        dialect = database.engine.dialect
        self._binds = [
            (c.name, c.type.dialect_impl(dialect).bind_processor(dialect)) for c in _COLUMNS
        ]
        self._stamp = dict(self._binds)["recorded_at"]

    def record(
        self,
        events: Sequence[UsageEvent | EncodedEvent],
        *,
        guard: Callable[[Session], None] | None = None,
    ) -> IngestResult:
        """Insert the events not yet in the ledger (one transaction) and charge those of
        them that no reservation settled. Events may come as their documents
        (``EncodedEvent``, what the usage journal holds). ``guard`` runs in the same
        transaction first, once this writer has its turn: it may write, and what it
        raises rolls everything back (reported usage is authorized this way)."""
        if not events:
            return IngestResult()
        now = self._now()
        insert = self._insert
        # One order for every writer: concurrent batches never wait on each other in a cycle.
        docs: list[dict[str, Any]] = []
        ordered: list[tuple[Any, ...]] = []
        if insert is not None:
            by_id = self._postgres_rows(events, now)
            docs = [by_id[event_id] for event_id in sorted(by_id)]
        else:
            values = self._sqlite_rows(events, now)
            ordered = [values[event_id] for event_id in sorted(values)]
        with self._db.transaction() as session:
            if insert is not None:
                # Writers take their turn, so ``seq`` (from a sequence, handed out at
                # insert) rises in commit order: a reader paging by ``seq`` can never see
                # a row while a lower one is still to commit, and skip it for good.
                # (SQLite's BEGIN IMMEDIATE already makes writers take turns.)
                session.execute(_TURN)
            if guard is not None:
                guard(session)
            if insert is not None:
                found = session.scalars(insert, {"rows": orjson.dumps(docs).decode()})
                inserted = set(found.all())
                owed = [
                    (r["tenant"], r["key_id"], r["amount_micros"])
                    for r in docs
                    if r["event_id"] in inserted and r["reservation_id"] is None
                ]
            else:
                fresh = self._insert_sqlite(session, ordered)
                inserted = {r[_EVENT_ID] for r in fresh}
                owed = [
                    (r[_TENANT], r[_KEY_ID], r[_AMOUNT]) for r in fresh if r[_RESERVATION] is None
                ]
            self._charge(session, owed, now)
        new: list[str] = []
        duplicates: list[str] = []
        seen: set[str] = set()
        for event in events:  # a second copy in the same batch is a duplicate too
            fresh_copy = event.event_id in inserted and event.event_id not in seen
            (new if fresh_copy else duplicates).append(event.event_id)
            seen.add(event.event_id)
        return IngestResult(inserted=tuple(new), duplicates=tuple(duplicates))

    def _postgres_rows(
        self, events: Sequence[UsageEvent | EncodedEvent], now: datetime
    ) -> dict[str, dict[str, Any]]:
        return {e.event_id: event_row(event_doc(e), now) for e in events}

    def _sqlite_rows(
        self, events: Sequence[UsageEvent | EncodedEvent], now: datetime
    ) -> dict[str, tuple[Any, ...]]:
        """Each event's SQLite bind values by id (the last copy of an id wins, as on
        PostgreSQL); raises KeyError or ValueError on a malformed document."""
        recorded_at = self._stamp(now)
        rows = {}
        for event in events:
            doc = event_doc(event)
            try:
                row = sqlite_row(doc, recorded_at)
            except Exception:
                row = None  # malformed: the general path raises what it always raised
            rows[event.event_id] = row if row is not None else self.general_row(doc, now)
        return rows

    def general_row(self, doc: dict[str, Any], now: datetime) -> tuple[Any, ...]:
        """``sqlite_row`` the general way: ``event_row``, then each column's bind
        processor. For documents in any form, and as the reference for the fast one."""
        row = event_row(doc, now)
        return tuple(row[name] if bind is None else bind(row[name]) for name, bind in self._binds)

    def _insert_sqlite(
        self, session: Session, ordered: list[tuple[Any, ...]]
    ) -> list[tuple[Any, ...]]:
        """Insert the rows whose ids are not in the ledger yet; those rows.

        ``ON CONFLICT DO NOTHING`` skips the ids already there, and the statement's
        row count says how many it inserted. All of them is the usual case, and then
        nothing is read. Otherwise the rows it inserted are the last that many by
        ``seq``: SQLite gives a new row a rowid above every row in the table, and
        under ``BEGIN IMMEDIATE`` no other writer comes between."""
        connection = session.connection()
        inserted = connection.exec_driver_sql(_SQLITE_INSERT, ordered).rowcount
        if inserted == len(ordered):
            return ordered
        if not inserted:
            return []
        latest = connection.exec_driver_sql(_SQLITE_LATEST, (inserted,))
        ids = {row[0] for row in latest}
        return [r for r in ordered if r[_EVENT_ID] in ids]

    def _charge(self, session: Session, owed: list[Charge], now: datetime) -> None:
        """Charge new events that no reservation settled to their caller's levels."""
        # One levels lookup per caller, not per event: a batch holds many of each.
        per_caller: dict[tuple[str, str | None], int] = defaultdict(int)
        for tenant, key_id, amount in owed:
            if amount:
                per_caller[tenant, key_id] += amount
        totals: dict[str, int] = defaultdict(int)
        tenant_of: dict[str, str] = {}
        for (tenant, key_id), amount in per_caller.items():
            for level in existing_levels(session, tenant, key_id):
                totals[level] += amount
                tenant_of[level] = tenant
        # The one lock order, as holds and settlements take it: any other deadlocks
        # against a batch of theirs on PostgreSQL.
        for level in sorted(totals, key=lambda lv: lock_order(tenant_of[lv], lv)):
            debit(session, level, totals[level], now)

    def get(self, event_id: str) -> LedgerEntry | None:
        with self._db.transaction() as session:
            row = session.scalar(select(UsageEventRow).where(UsageEventRow.event_id == event_id))
            return entry_of(row) if row else None

    def entries(
        self,
        *,
        tenant: str | None = None,
        model: str | None = None,
        after_seq: int = 0,
        limit: int = 1000,
    ) -> list[LedgerEntry]:
        """Events in arrival order after ``after_seq`` (a watermark), at most ``limit``."""
        query = select(UsageEventRow).where(UsageEventRow.seq > after_seq)
        if tenant is not None:
            query = query.where(UsageEventRow.tenant == tenant)
        if model is not None:
            query = query.where(UsageEventRow.model == model)
        with self._db.transaction() as session:
            rows = session.scalars(query.order_by(UsageEventRow.seq).limit(limit))
            return [entry_of(r) for r in rows]

    def count(self) -> int:
        with self._db.transaction() as session:
            return int(session.scalar(select(func.count()).select_from(UsageEventRow)) or 0)
