"""Reserve, then settle: money is held for a call before it runs.

``reserve`` holds the call's upper-bound cost on every level that exists for the
caller (see ``modelport.metering.balances``) in one transaction: each level's
conditional UPDATE must succeed, or the call is refused with 402
``budget_exceeded`` before any work and holds nothing. ``reserve_many`` does that
for many calls in one transaction (group reservation, ``reserve_group``): each call
is held on all its levels or refused alone. ``settle`` then, again in one
transaction, marks the reservation settled, gives back what each level held,
charges the actual amount, and writes the call's usage events to the outbox.
``release`` gives a hold back whole when the work never ran.

A hold may be taken for work of many calls (a job's upper bound, ``jobs.billing``):
``draw`` moves part of it into a reservation of one call, in one transaction (the
hold's amount shrinks by what the call's reservation holds; the levels' holds do not
change: the money is held once). That reservation is settled as any other; what is
left of the hold is released when the work ends, or expires.

A reservation that is never settled (its process died) expires ``ttl`` after it
was taken; ``sweep`` marks it expired and gives its hold back. Settling an expired
reservation still charges the work (it ran), without giving anything back twice.

Settling is idempotent per reservation, so a settlement may be applied again (the
usage journal replays what a crash left unconfirmed): a reservation already settled
(or released) is not charged again, and its events, written to the outbox again, are
recorded once by the ledger, which deduplicates by ``event_id``.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from sqlalchemy import bindparam, insert, select, text, update
from sqlalchemy.orm import Session

from modelport.errors import PaymentRequired
from modelport.logs import log_event
from modelport.metering.balances import existing_levels, hold, lock_order, room, unhold
from modelport.metering.balances import settle as settle_level
from modelport.metering.outbox import EncodedEvent, Outbox
from modelport.metering.types import Reservation, ReservationState, UsageEvent
from modelport.store import Database
from modelport.store.base import UTCDateTime, utcnow
from modelport.store.database import affected_rows
from modelport.store.tables import ReservationRow

log = logging.getLogger(__name__)

_INSERT = insert(ReservationRow)
_ASYNC_COMMIT = text("SET LOCAL synchronous_commit TO OFF")
_SETTLE = text(
    "UPDATE reservations SET state = 'settled', settled_micros = :actual, settled_at = :now "
    "WHERE id = :id AND state = 'held'"
).bindparams(bindparam("now", type_=UTCDateTime()))
_SETTLE_EXPIRED = text(
    "UPDATE reservations SET settled_micros = :actual, settled_at = :now "
    "WHERE id = :id AND state = 'expired' AND settled_micros IS NULL"
).bindparams(bindparam("now", type_=UTCDateTime()))
_EXISTS = text("SELECT 1 FROM reservations WHERE id = :id")
_DRAW = text(
    "UPDATE reservations SET amount_micros = amount_micros - :amount "
    "WHERE id = :hold AND tenant = :tenant AND state = 'held' AND amount_micros >= :amount"
)
_PROBE = text("UPDATE reservations SET state = state WHERE id = ''")


def reservation_of(row: ReservationRow) -> Reservation:
    """A ``reservations`` row as a ``Reservation``."""
    return Reservation(
        id=row.id,
        tenant=row.tenant,
        key_id=row.key_id,
        amount_micros=row.amount_micros,
        levels=tuple(row.levels),
        state=ReservationState(row.state),
        created_at=row.created_at,
        expires_at=row.expires_at,
        settled_micros=row.settled_micros,
        settled_at=row.settled_at,
        model=row.model,
    )


def reservation_to_doc(reservation: Reservation) -> dict[str, Any]:
    """What settling needs of a reservation, as a document for orjson (the usage
    journal). Its datetimes are left as they are: orjson writes them in ISO 8601 at a
    fraction of the cost of ``isoformat``."""
    return {
        "id": reservation.id,
        "tenant": reservation.tenant,
        "key_id": reservation.key_id,
        "amount_micros": reservation.amount_micros,
        "levels": reservation.levels,
        "created_at": reservation.created_at,
        "expires_at": reservation.expires_at,
        "model": reservation.model,
    }


def reservation_from_doc(doc: dict[str, Any]) -> Reservation:
    """The inverse of ``reservation_to_doc`` once through JSON: a held reservation
    (KeyError, TypeError or ValueError on a malformed document)."""
    return Reservation(
        id=doc["id"],
        tenant=doc["tenant"],
        key_id=doc["key_id"],
        amount_micros=int(doc["amount_micros"]),
        levels=tuple(doc["levels"]),
        state=ReservationState.HELD,
        created_at=datetime.fromisoformat(doc["created_at"]),
        expires_at=datetime.fromisoformat(doc["expires_at"]),
        model=doc.get("model"),
    )


def _refused(tenant: str, level: str, amount: int) -> PaymentRequired:
    kind = "budget" if level.startswith("budget:") else level.split(":")[1] + " balance"
    return PaymentRequired(
        f"the {kind} of {tenant!r} does not cover this call ({amount} micro-units held "
        "until it settles)",
        code="budget_exceeded",
        level=level,
        required_micros=amount,
    )


class HoldRequest(NamedTuple):
    """One call's reservation request: hold ``amount`` on the levels of ``tenant`` and
    ``key_id``, expiring ``ttl_seconds`` after it is taken, for a call of ``model``."""

    tenant: str
    key_id: str | None
    amount: int
    ttl_seconds: float
    model: str | None = None
    id: str | None = None
    """The reservation's id, for a call that may be repeated (``repeatable_id``); None:
    a fresh random one."""


HoldOutcome = Reservation | PaymentRequired | None
"""What ``reserve_many`` answers a request: its reservation, its refusal, or None (nothing
to hold)."""


class _NothingHeld(Exception):
    """Rolls back a batch that holds nothing: its refusals leave no trace."""


class Reservations:
    """Takes, settles, releases and sweeps reservations; writes settled usage to the outbox."""

    def __init__(
        self,
        database: Database,
        outbox: Outbox,
        *,
        now: Callable[[], datetime] = utcnow,
    ) -> None:
        self._db = database
        self._outbox = outbox
        self._now = now

    def reserve(
        self,
        tenant: str,
        key_id: str | None,
        amount: int,
        *,
        ttl_seconds: float,
        model: str | None = None,
        reservation_id: str | None = None,
    ) -> Reservation | None:
        """Hold ``amount`` on every level of the caller, or raise ``PaymentRequired``.
        None when there is nothing to hold (a free call, or no balance nor budget).
        ``reservation_id``: the id to take it under (a repeatable call's), else random."""
        request = HoldRequest(tenant, key_id, amount, ttl_seconds, model, reservation_id)
        (outcome,) = self.reserve_many([request])
        if isinstance(outcome, PaymentRequired):
            raise outcome
        return outcome

    def reserve_many(self, requests: Sequence[HoldRequest]) -> list[HoldOutcome]:
        """``reserve`` for several calls in one transaction: each call is held on every
        level it meets, or on none and refused (its ``PaymentRequired`` in its place),
        exactly as reserving them one after the other, in order, would have. Raises only
        when the transaction fails (then nothing is held).

        The levels are taken in the one lock order (``lock_order``, as
        ``settle_many``), so concurrent batches and settlements cannot deadlock. Each
        level first tries the sum of its calls in one conditional UPDATE: when every
        level takes its sum, every call fits. From the first level that does not, the
        rest are locked and read in that order (``room``), the calls are decided one
        after the other against what those levels can still hold (the levels before
        it hold any subset of their calls), and each level is updated once: the
        refused calls' share given back before it, the held calls' sum taken from it.
        """
        outcomes: list[HoldOutcome] = [None] * len(requests)
        if all(request.amount <= 0 for request in requests):
            return outcomes  # free calls: no transaction
        now = self._now()
        try:
            with self._db.transaction() as session:
                if self._db.dialect == "postgresql":
                    # A hold lost in a server crash is harmless (settling then finds no
                    # hold and charges without giving anything back), so it need not wait
                    # for the disk: the settlement, which writes the money and the
                    # events, does.
                    session.execute(_ASYNC_COMMIT)
                rows = self._hold_all(session, requests, outcomes, now)
                if not rows:
                    raise _NothingHeld  # roll back: a refusal changes nothing
                session.connection().execute(_INSERT, rows)
        except _NothingHeld:
            pass
        return outcomes

    def _hold_all(
        self,
        session: Session,
        requests: Sequence[HoldRequest],
        outcomes: list[HoldOutcome],
        now: datetime,
    ) -> list[dict[str, Any]]:
        """Hold every request on its levels (``reserve_many``), filling ``outcomes``;
        the reservation rows to insert."""
        levels_of: dict[tuple[str, str | None], list[str]] = {}
        callers: dict[str, list[int]] = {}  # level -> the requests meeting it, in order
        tenant_of: dict[str, str] = {}
        for i, (tenant, key_id, amount, *_) in enumerate(requests):
            if amount <= 0:
                continue
            levels = levels_of.get((tenant, key_id))
            if levels is None:
                levels = levels_of[tenant, key_id] = existing_levels(session, tenant, key_id)
            for level in levels:
                callers.setdefault(level, []).append(i)
                tenant_of[level] = tenant
        order = sorted(callers, key=lambda lv: lock_order(tenant_of[lv], lv))
        refused: dict[int, str] = {}  # request -> the level that refused it
        for index, level in enumerate(order):
            if not hold(session, level, sum(requests[i].amount for i in callers[level]), now):
                refused = self._one_after_another(
                    session, requests, levels_of, callers, order, index, now
                )
                break
        rows = []
        for i, (tenant, key_id, amount, ttl_seconds, model, given_id) in enumerate(requests):
            if i in refused:
                outcomes[i] = _refused(tenant, refused[i], amount)
                continue
            if amount <= 0 or not levels_of[tenant, key_id]:
                continue  # free, or no level to hold on
            levels = levels_of[tenant, key_id]
            reservation = Reservation(
                id=given_id or secrets.token_hex(16),
                tenant=tenant,
                key_id=key_id,
                amount_micros=amount,
                levels=tuple(levels),
                state=ReservationState.HELD,
                created_at=now,
                expires_at=now + timedelta(seconds=ttl_seconds),
                model=model,
            )
            outcomes[i] = reservation
            rows.append(
                {
                    "id": reservation.id,
                    "tenant": tenant,
                    "key_id": key_id,
                    "amount_micros": amount,
                    "levels": levels,
                    "state": ReservationState.HELD.value,
                    "created_at": now,
                    "expires_at": reservation.expires_at,
                    "model": model,
                }
            )
        return rows

    def _one_after_another(
        self,
        session: Session,
        requests: Sequence[HoldRequest],
        levels_of: dict[tuple[str, str | None], list[str]],
        callers: dict[str, list[int]],
        order: list[str],
        first: int,
        now: datetime,
    ) -> dict[int, str]:
        """Decide the calls one after the other, from ``order[first]``, the first level
        that did not take the sum of its calls (``order[:first]`` did, so any subset of
        their calls fits there); update each level once. The refused calls, each with
        the first of its levels that has no room for it."""
        rooms = {level: room(session, level, now) for level in order[first:]}  # locks
        taken = dict.fromkeys(rooms, 0)
        refused: dict[int, str] = {}
        for i in sorted({i for level in order for i in callers[level]}):
            tenant, key_id, amount, *_ = requests[i]
            mine = [level for level in levels_of[tenant, key_id] if level in rooms]
            for level in mine:
                space = rooms[level]
                if space is not None and taken[level] + amount > space:
                    refused[i] = level
                    break
            else:
                for level in mine:
                    taken[level] += amount
        for level in order[:first]:
            back = sum(requests[i].amount for i in callers[level] if i in refused)
            if back:
                unhold(session, level, back, now)
        for level, amount in taken.items():
            if amount and not hold(session, level, amount, now):
                # Cannot happen while the rows are locked: roll the batch back rather
                # than hold anything the decision did not.
                raise RuntimeError(f"{level} changed while this transaction held its lock")
        return refused

    def draw(
        self,
        hold_id: str,
        tenant: str,
        amount: int,
        *,
        reservation_id: str,
        ttl_seconds: float,
        model: str | None = None,
    ) -> Reservation | None:
        """Move ``amount`` of the tenant's held hold ``hold_id`` into a new reservation
        ``reservation_id`` on the same levels, in one transaction; None (nothing done)
        when that hold is not held or has less left."""
        now = self._now()
        with self._db.transaction() as session:
            params = {"hold": hold_id, "tenant": tenant, "amount": amount}
            if not affected_rows(session.execute(_DRAW, params)):
                return None
            hold_row = session.get(ReservationRow, hold_id)
            assert hold_row is not None
            reservation = Reservation(
                id=reservation_id,
                tenant=tenant,
                key_id=hold_row.key_id,
                amount_micros=amount,
                levels=tuple(hold_row.levels),
                state=ReservationState.HELD,
                created_at=now,
                expires_at=now + timedelta(seconds=ttl_seconds),
                model=model,
            )
            session.connection().execute(
                _INSERT,
                {
                    "id": reservation.id,
                    "tenant": tenant,
                    "key_id": reservation.key_id,
                    "amount_micros": amount,
                    "levels": list(reservation.levels),
                    "state": ReservationState.HELD.value,
                    "created_at": now,
                    "expires_at": reservation.expires_at,
                    "model": model,
                },
            )
        return reservation

    def settle(
        self, reservation: Reservation | None, events: Sequence[UsageEvent | EncodedEvent]
    ) -> None:
        """Charge the events' amount and give back the rest of the hold; write the events
        to the outbox, all in one transaction. Without a reservation, only the outbox
        write (the ledger charges such events when it records them)."""
        self.settle_many([(reservation, events)])

    def settle_many(
        self,
        calls: Sequence[tuple[Reservation | None, Sequence[UsageEvent | EncodedEvent]]],
        *,
        outbox: bool = True,
    ) -> None:
        """``settle`` for several calls in one transaction (group commit): all of them
        are durable when it returns, or none is. Each level is updated once, by the
        sum of what the calls give back and cost, in lock order (tenant, then the
        levels' own order), so concurrent batches and holds cannot deadlock.
        ``outbox=False``: the caller delivers the events itself (the usage journal)."""
        if not outbox and all(reservation is None for reservation, _ in calls):
            return  # nothing held, nothing to write: no transaction
        now = self._now()
        # level -> [sort key, held, actual]
        levels: dict[str, list[Any]] = {}
        with self._db.transaction() as session:
            connection = session.connection()
            for reservation, events in calls:
                if reservation is None:
                    continue
                actual = sum(e.amount_micros for e in events)
                params = {"id": reservation.id, "actual": actual, "now": now}
                if connection.execute(_SETTLE, params).rowcount:
                    held = reservation.amount_micros
                elif self._unsettled(session, reservation, params):
                    held = 0  # the hold is back already; the work still ran
                else:
                    continue  # settled before (a replay) or released: charged already
                for level in reservation.levels:
                    entry = levels.setdefault(level, [lock_order(reservation.tenant, level), 0, 0])
                    entry[1] += held
                    entry[2] += actual
            for level, (_, held, actual) in sorted(levels.items(), key=lambda item: item[1][0]):
                settle_level(session, level, held, actual, now)
            if outbox:
                self._outbox.add(session, [e for _, events in calls for e in events])

    def _unsettled(
        self, session: Session, reservation: Reservation, params: dict[str, Any]
    ) -> bool:
        """A reservation not held any more: True, recording what it settled for, when its
        work was never charged (it expired, or its row was lost: a hold taken without
        waiting for the disk and a database crash); False when it was settled already or
        released."""
        connection = session.connection()
        if connection.execute(_SETTLE_EXPIRED, params).rowcount:
            return True
        if connection.execute(_EXISTS, {"id": reservation.id}).first() is not None:
            return False
        connection.execute(
            _INSERT,
            {
                "id": reservation.id,
                "tenant": reservation.tenant,
                "key_id": reservation.key_id,
                "amount_micros": reservation.amount_micros,
                "levels": list(reservation.levels),
                "state": ReservationState.SETTLED.value,
                "created_at": reservation.created_at,
                "expires_at": reservation.expires_at,
                "settled_micros": params["actual"],
                "settled_at": params["now"],
                "model": reservation.model,
            },
        )
        return True

    def writable(self) -> bool:
        """Whether the database takes writes now (a write that changes nothing: a
        server that answers but is read-only, as after a failover, does not)."""
        try:
            with self._db.transaction() as session:
                session.execute(_PROBE)
        except Exception:
            return False
        return True

    def release(self, reservation: Reservation | None) -> bool:
        """Give a hold back whole (the work never ran); False when it was no longer held."""
        if reservation is None:
            return False
        return self._end(reservation.id, ReservationState.RELEASED)

    def _end(self, reservation_id: str, state: ReservationState) -> bool:
        now = self._now()
        with self._db.transaction() as session:
            row = session.get(ReservationRow, reservation_id)
            if row is None:
                return False
            ended = affected_rows(
                session.execute(
                    update(ReservationRow)
                    .where(
                        ReservationRow.id == reservation_id,
                        ReservationRow.state == ReservationState.HELD.value,
                    )
                    .values(state=state.value, settled_at=now)
                )
            )
            if ended:
                for level in row.levels:
                    unhold(session, level, row.amount_micros, now)
            return bool(ended)

    def sweep(self, limit: int = 500) -> int:
        """Expire held reservations past their time and give their holds back; how many."""
        query = (
            select(ReservationRow.id)
            .where(
                ReservationRow.state == ReservationState.HELD.value,
                ReservationRow.expires_at < self._now(),
            )
            .order_by(ReservationRow.expires_at)
            .limit(limit)
        )
        with self._db.transaction() as session:
            due = list(session.scalars(query))
        expired = sum(self._end(rid, ReservationState.EXPIRED) for rid in due)
        log_event(
            log,
            "reservations.swept",
            level=logging.INFO if expired else logging.DEBUG,
            expired=expired,
        )
        return expired

    def get(self, reservation_id: str) -> Reservation | None:
        with self._db.transaction() as session:
            row = session.get(ReservationRow, reservation_id)
            return reservation_of(row) if row else None

    def held(self, tenant: str) -> list[Reservation]:
        """The tenant's reservations still held."""
        query = select(ReservationRow).where(
            ReservationRow.tenant == tenant, ReservationRow.state == ReservationState.HELD.value
        )
        with self._db.transaction() as session:
            return [reservation_of(r) for r in session.scalars(query)]
