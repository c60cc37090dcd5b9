"""The durable outbox: usage events leave the request path through it.

The request path adds its events in the same transaction that settles the call
(``add``), so they are on disk before the response is sent. A drainer then
delivers them at least once to a ``UsageSink`` (the ledger in-process, or a Redis
stream in the distributed shape):

1. ``claim``: take a batch of rows, oldest first, for ``lease_seconds``;
2. ``sink.deliver(events)``;
3. ``ack``: delete the delivered rows.

A drainer that dies between 2 and 3 leaves its rows claimed; the claim lapses and
another drainer delivers them again. The ledger deduplicates by ``event_id``, so a
redelivery never bills twice.

Events may come as ``UsageEvent``s or already encoded (``EncodedEvent``: the usage
journal holds each event's document as JSON and hands it over as it is).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

import orjson
from sqlalchemy import bindparam, delete, func, insert, or_, select, text, update
from sqlalchemy.orm import Session

from modelport.metering.events import event_from_doc, event_to_doc
from modelport.metering.types import IngestResult, UsageEvent
from modelport.store import Database
from modelport.store.base import UTCDateTime, utcnow
from modelport.store.tables import UsageOutboxRow

_INSERT = insert(UsageOutboxRow)
_INSERT_ENCODED = {
    dialect: text(
        "INSERT INTO usage_outbox (event_id, payload, created_at, attempts) "
        f"VALUES (:event_id, {payload}, :created_at, 0)"
    ).bindparams(bindparam("created_at", type_=UTCDateTime()))
    for dialect, payload in (("sqlite", ":payload"), ("postgresql", "CAST(:payload AS JSON)"))
}


@dataclass(frozen=True, slots=True)
class EncodedEvent:
    """A usage event as its document (``event_to_doc``), with what settling reads of it;
    ``payload`` is the document's JSON text, for the outbox."""

    event_id: str
    amount_micros: int
    doc: dict[str, Any]

    @property
    def payload(self) -> str:
        return orjson.dumps(self.doc).decode()


def event_doc(event: UsageEvent | EncodedEvent) -> dict[str, Any]:
    """An event's document (``event_to_doc``), taken as it is from an encoded one."""
    return event.doc if isinstance(event, EncodedEvent) else event_to_doc(event)


class UsageSink(Protocol):
    """Where the outbox delivers events. ``deliver`` returns once the events are durable
    there (or raises, and they are delivered again later); it may see an event twice."""

    def deliver(self, events: Sequence[UsageEvent | EncodedEvent]) -> IngestResult | None: ...


@dataclass(frozen=True)
class Claimed:
    """Rows a drainer holds: their outbox ids and events."""

    ids: tuple[int, ...]
    events: tuple[UsageEvent, ...]


class Outbox:
    """The ``usage_outbox`` table."""

    def __init__(
        self,
        database: Database,
        *,
        lease_seconds: float = 30.0,
        now: Callable[[], datetime] = utcnow,
    ) -> None:
        self._db = database
        self._lease = timedelta(seconds=lease_seconds)
        self._now = now

    def add(self, session: Session, events: Sequence[UsageEvent | EncodedEvent]) -> None:
        """Write events in the caller's transaction (committed with it)."""
        if not events:
            return
        now = self._now()
        connection = session.connection()
        rows = [
            {"event_id": e.event_id, "payload": event_to_doc(e), "created_at": now, "attempts": 0}
            for e in events
            if isinstance(e, UsageEvent)
        ]
        if rows:
            connection.execute(_INSERT, rows)
        if len(rows) < len(events):
            encoded = [
                {"event_id": e.event_id, "payload": e.payload, "created_at": now}
                for e in events
                if isinstance(e, EncodedEvent)
            ]
            connection.execute(_INSERT_ENCODED[self._db.dialect], encoded)

    def put(self, events: Sequence[UsageEvent]) -> None:
        """Write events in a transaction of their own."""
        with self._db.transaction() as session:
            self.add(session, events)

    def claim(self, limit: int = 500) -> Claimed:
        """Take up to ``limit`` unclaimed (or lapsed) rows, oldest first."""
        now = self._now()
        free = or_(UsageOutboxRow.claimed_until.is_(None), UsageOutboxRow.claimed_until < now)
        query = select(UsageOutboxRow.id).where(free).order_by(UsageOutboxRow.id).limit(limit)
        if self._db.dialect == "postgresql":
            # Concurrent drainers take different rows instead of queueing on the same ones.
            query = query.with_for_update(skip_locked=True)
        with self._db.transaction() as session:
            ids = list(session.scalars(query))
            if not ids:
                return Claimed((), ())
            session.execute(
                update(UsageOutboxRow)
                .where(UsageOutboxRow.id.in_(ids))
                .values(claimed_until=now + self._lease, attempts=UsageOutboxRow.attempts + 1)
            )
            rows = session.execute(
                select(UsageOutboxRow.id, UsageOutboxRow.payload)
                .where(UsageOutboxRow.id.in_(ids))
                .order_by(UsageOutboxRow.id)
            )
            claimed = [(i, event_from_doc(p)) for i, p in rows]
        return Claimed(tuple(i for i, _ in claimed), tuple(e for _, e in claimed))

    def ack(self, ids: Sequence[int]) -> None:
        """Delete delivered rows."""
        if not ids:
            return
        with self._db.transaction() as session:
            session.execute(delete(UsageOutboxRow).where(UsageOutboxRow.id.in_(list(ids))))

    def drain_once(self, sink: UsageSink, limit: int = 500) -> int:
        """Claim, deliver and ack one batch; the number of events delivered."""
        claimed = self.claim(limit)
        if not claimed.ids:
            return 0
        sink.deliver(claimed.events)
        self.ack(claimed.ids)
        return len(claimed.ids)

    def drain(self, sink: UsageSink, limit: int = 500) -> int:
        """Deliver until nothing is left to claim; the number of events delivered."""
        total = 0
        while delivered := self.drain_once(sink, limit):
            total += delivered
        return total

    def pending(self) -> int:
        """Rows not yet acknowledged (claimed or not)."""
        with self._db.transaction() as session:
            return int(session.scalar(select(func.count()).select_from(UsageOutboxRow)) or 0)


class Recorder(Protocol):
    """What records delivered events for good (the ledger)."""

    def record(self, events: Sequence[UsageEvent | EncodedEvent]) -> IngestResult: ...


class LedgerSink:
    """Delivers straight into a ledger in this process (the embedded shape)."""

    def __init__(self, ledger: Recorder) -> None:
        self._ledger = ledger

    def deliver(self, events: Sequence[UsageEvent | EncodedEvent]) -> IngestResult:
        return self._ledger.record(events)
