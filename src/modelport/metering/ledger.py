"""The usage ledger: every usage event exactly once, however often it was delivered.

``record`` inserts a batch so that a redelivered or duplicated event is ignored and the
caller learns which ones were new. On PostgreSQL that is one ``INSERT ... SELECT FROM
jsonb_to_recordset ... ON CONFLICT (event_id) DO NOTHING RETURNING event_id``. On SQLite
it reads which of the batch's ids are there already, then inserts the others with one
prepared single-row statement (``executemany``): a multi-row ``VALUES ... RETURNING``
is a new statement for SQLite to compile at every batch size, and that compile cost
more than the insert. The transaction began with ``BEGIN IMMEDIATE``, so no other
writer comes between the read and the insert. Events that were not
settled against a reservation (usage reported by external backends) are charged to
the caller's balances and budget in the same transaction, for the new ones only.

Rows are appended and never changed; ``seq`` orders them by arrival, a watermark
for consumers such as billing.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import orjson
from sqlalchemy import TextClause, func, select, text
from sqlalchemy.dialects import postgresql
from sqlalchemy.orm import Session

from modelport.metering.balances import debit, existing_levels
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
    dialect = postgresql.dialect()  # type: ignore[no-untyped-call]
    columns = [c for c in table.columns if c.name != "seq"]
    names = ", ".join(c.name for c in columns)
    shape = ", ".join(f"{c.name} {c.type.compile(dialect=dialect)}" for c in columns)
    return text(
        f"INSERT INTO usage_events ({names}) "
        f"SELECT {names} FROM jsonb_to_recordset(CAST(:rows AS jsonb)) AS r({shape}) "
        "ON CONFLICT (event_id) DO NOTHING RETURNING event_id"
    )


_COLUMNS = [c for c in UsageEventRow.__table__.columns if c.name != "seq"]
_SQLITE_INSERT = (
    f"INSERT INTO usage_events ({', '.join(c.name for c in _COLUMNS)}) "
    f"VALUES ({', '.join('?' * len(_COLUMNS))}) ON CONFLICT (event_id) DO NOTHING"
)
_SQLITE_MAX_IDS = 500
"""Ids per ``IN (...)`` lookup, under SQLite's bound-parameter limit."""


class Ledger:
    """Appends usage events, deduplicated by ``event_id``; reads them back."""

    def __init__(self, database: Database, *, now: Callable[[], datetime] = utcnow) -> None:
        self._db = database
        self._now = now
        self._insert = _postgres_insert() if database.dialect == "postgresql" else None
        # How each column's value is stored (UTC datetimes as SQLite's text), worked out
        # once: the rows then go to the driver without SQLAlchemy's per-row work.
        dialect = database.engine.dialect
        self._binds = [(c.name, c.type.bind_processor(dialect)) for c in _COLUMNS]

    def record(self, events: Sequence[UsageEvent | EncodedEvent]) -> IngestResult:
        """Insert the events not yet in the ledger (one transaction) and charge those of
        them that no reservation settled. Events may come as their documents
        (``EncodedEvent``, what the usage journal holds)."""
        if not events:
            return IngestResult()
        now = self._now()
        rows = {e.event_id: event_row(event_doc(e), now) for e in events}
        # One order for every writer: concurrent batches never wait on each other in a cycle.
        ordered = [rows[event_id] for event_id in sorted(rows)]
        with self._db.transaction() as session:
            if self._insert is not None:  # PostgreSQL
                found = session.scalars(self._insert, {"rows": orjson.dumps(ordered).decode()})
                inserted = set(found.all())
            else:
                inserted = self._insert_sqlite(session, ordered)
            self._charge(session, [r for r in ordered if r["event_id"] in inserted], now)
        new, duplicates, seen = [], [], set()
        for event in events:  # a second copy in the same batch is a duplicate too
            fresh = event.event_id in inserted and event.event_id not in seen
            (new if fresh else duplicates).append(event.event_id)
            seen.add(event.event_id)
        return IngestResult(inserted=tuple(new), duplicates=tuple(duplicates))

    def _insert_sqlite(self, session: Session, ordered: list[dict[str, Any]]) -> set[str]:
        """Insert the rows whose ids are not in the ledger yet; their ids."""
        connection = session.connection()
        ids = [r["event_id"] for r in ordered]
        present: set[str] = set()
        for start in range(0, len(ids), _SQLITE_MAX_IDS):
            chunk = tuple(ids[start : start + _SQLITE_MAX_IDS])
            marks = ", ".join("?" * len(chunk))
            query = f"SELECT event_id FROM usage_events WHERE event_id IN ({marks})"
            present.update(row[0] for row in connection.exec_driver_sql(query, chunk))
        fresh = [r for r in ordered if r["event_id"] not in present]
        if fresh:
            binds = self._binds
            connection.exec_driver_sql(
                _SQLITE_INSERT,
                [
                    tuple(row[name] if bind is None else bind(row[name]) for name, bind in binds)
                    for row in fresh
                ],
            )
        return {r["event_id"] for r in fresh}

    def _charge(self, session: Session, rows: list[dict[str, Any]], now: datetime) -> None:
        owed: dict[str, int] = defaultdict(int)
        for row in rows:
            if row["reservation_id"] is None and row["amount_micros"]:
                for level in existing_levels(session, row["tenant"], row["key_id"]):
                    owed[level] += row["amount_micros"]
        for level in sorted(owed):  # the lock order of modelport.metering.balances
            debit(session, level, owed[level], now)

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
