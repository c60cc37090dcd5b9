"""Who may report usage, and against what: usage reported from outside the platform
must be tied to something the consumer did.

A reported event (``POST /api/usage/events``) is accepted from a reporter other than
the platform admin only when the reporter's tenant publishes the event's model, and

- the event's ``tenant`` is the reporter's own tenant (a tenant may bill itself); or
- it names a ``call_id``: the id of a reservation the platform took for that consumer
  and that model when it routed the call, once the platform settled it (409
  ``call_in_progress`` before). What the batch reports against the call is at most
  what was held for it, less what the platform settled for it itself; a call is
  reported against once; or
- the consumer holds an active ``UsageAuthorization`` (a mandate) of the reporter's
  tenant (for that model, or for all of its models) made before the call started;
  the events count against its cap.

Otherwise the whole batch is refused (403): ``forbidden`` (not the model's publisher),
``usage_not_authorized`` (no call id nor mandate covers an event),
``authorization_exhausted`` (an event would pass the mandate's cap or the call's hold)
or ``call_already_reported``. The check runs in the ledger's transaction, after the
ledger writers' turn is taken, over the events not in the ledger yet: a retried batch
is not counted twice, and nothing is counted unless the batch is recorded.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from modelport.errors import Conflict, Forbidden, InvalidInput, NotFound
from modelport.metering.ingest import PublisherCheck, ReportedEvent
from modelport.metering.types import Reporter, ReservationState, UsageAuthorization
from modelport.store import Database
from modelport.store.base import is_row_id, utcnow
from modelport.store.tables import ReservationRow, UsageAuthorizationRow, UsageEventRow

USAGE_REPORT = "usage.report"


def authorization_of(row: UsageAuthorizationRow) -> UsageAuthorization:
    return UsageAuthorization(
        id=row.id,
        consumer=row.consumer,
        publisher=row.publisher,
        model=row.model,
        cap_micros=row.cap_micros,
        spent_micros=row.spent_micros,
        expires_at=row.expires_at,
        created_at=row.created_at,
        created_by=row.created_by,
        withdrawn_at=row.withdrawn_at,
        withdrawn_by=row.withdrawn_by,
    )


def authorization_not_found(authorization_id: int) -> NotFound:
    return NotFound(
        f"usage authorization {authorization_id} not found",
        code="usage_authorization_not_found",
    )


def _get(
    session: Session, authorization_id: int, *, lock: bool = False
) -> UsageAuthorizationRow | None:
    if not is_row_id(authorization_id):  # past the column's range: no such row
        return None
    return session.get(UsageAuthorizationRow, authorization_id, with_for_update=lock)


class UsageAuthorizations:
    """Consumers' mandates for publishers to report their usage: made, listed, withdrawn
    (never deleted: what was reported under one stays explained)."""

    def __init__(self, database: Database, *, now: Callable[[], datetime] = utcnow) -> None:
        self._db = database
        self._now = now

    def create(
        self,
        consumer: str,
        publisher: str,
        *,
        cap_micros: int,
        actor: str,
        model: str | None = None,
        expires_at: datetime | None = None,
    ) -> UsageAuthorization:
        """A new mandate of ``consumer`` for ``publisher`` (InvalidInput when it could
        never be used)."""
        now = self._now()
        if consumer == publisher:
            raise InvalidInput(
                "a tenant needs no authorization to report its own usage",
                code="invalid_usage_authorization",
                field="publisher",
            )
        if model is not None and model.split("/", 1)[0] != publisher:
            raise InvalidInput(
                f"{model} is not a model of {publisher}",
                code="invalid_usage_authorization",
                field="model",
            )
        if cap_micros <= 0:
            raise InvalidInput(
                "'cap_micros' must be at least 1", code="invalid_usage_authorization"
            )
        if expires_at is not None and expires_at <= now:
            raise InvalidInput(
                "'expires_at' is not in the future",
                code="invalid_usage_authorization",
                field="expires_at",
            )
        with self._db.transaction() as session:
            row = UsageAuthorizationRow(
                consumer=consumer,
                publisher=publisher,
                model=model,
                cap_micros=cap_micros,
                spent_micros=0,
                expires_at=expires_at,
                created_at=now,
                created_by=actor,
            )
            session.add(row)
            session.flush()
            return authorization_of(row)

    def get(self, authorization_id: int) -> UsageAuthorization:
        with self._db.transaction() as session:
            row = _get(session, authorization_id)
            if row is None:
                raise authorization_not_found(authorization_id)
            return authorization_of(row)

    def list(
        self, *, involving: str | None = None, include_withdrawn: bool = True
    ) -> list[UsageAuthorization]:
        """Mandates given by or to ``involving`` (None: all), oldest first."""
        query = select(UsageAuthorizationRow).order_by(UsageAuthorizationRow.id)
        if involving is not None:
            query = query.where(
                (UsageAuthorizationRow.consumer == involving)
                | (UsageAuthorizationRow.publisher == involving)
            )
        if not include_withdrawn:
            query = query.where(UsageAuthorizationRow.withdrawn_at.is_(None))
        with self._db.transaction() as session:
            return [authorization_of(r) for r in session.scalars(query)]

    def withdraw(self, authorization_id: int, *, actor: str) -> UsageAuthorization:
        """End a mandate now: later reports under it are refused; what was reported
        before stays. Withdrawing it again changes nothing."""
        with self._db.transaction() as session:
            row = _get(session, authorization_id, lock=True)
            if row is None:
                raise authorization_not_found(authorization_id)
            if row.withdrawn_at is None:
                row.withdrawn_at = self._now()
                row.withdrawn_by = actor
                session.flush()
            return authorization_of(row)


def _refused(index: int, message: str, code: str, **extra: object) -> Forbidden:
    return Forbidden(
        f"event {index}: {message}", code=code, index=index, permission=USAGE_REPORT, **extra
    )


def publisher_check(reporter: Reporter) -> PublisherCheck | None:
    """The check that ``reporter`` publishes each reported model (None: the admin, who
    may report anything), for ``parse_batch``: a model of another tenant is refused
    the same way whether or not it exists."""
    if reporter.is_admin:
        return None

    def check(index: int, model: str) -> None:
        if model.split("/", 1)[0] != reporter.tenant:
            raise _refused(
                index, f"usage of {model} may only be reported by its publisher", "forbidden"
            )

    return check


def authorize_reported(
    session: Session, reporter: Reporter, reported: Sequence[ReportedEvent], now: datetime
) -> None:
    """Check a batch against what its reporter may report (see the module docstring) and
    count what it spends, in ``session`` (the ledger's transaction); raises
    ``Forbidden`` for the first event that may not be recorded."""
    if reporter.is_admin:
        return
    for index, (event, _) in enumerate(reported):
        if event.publisher != reporter.tenant:
            raise _refused(
                index,
                f"usage of {event.model} may only be reported by its publisher",
                "forbidden",
            )
    # The last copy of an id is the one the ledger keeps; ids already in it change nothing.
    last = {event.event_id: index for index, (event, _) in enumerate(reported)}
    present = set(
        session.scalars(
            select(UsageEventRow.event_id).where(UsageEventRow.event_id.in_(list(last)))
        )
    )
    fresh = [i for i in sorted(last.values()) if reported[i].event.event_id not in present]
    by_call: dict[str, list[int]] = defaultdict(list)
    by_mandate: list[int] = []
    for index in fresh:
        event, call_id = reported[index]
        if event.tenant == reporter.tenant:
            continue  # a tenant billing itself
        if call_id is not None:
            by_call[call_id].append(index)
        else:
            by_mandate.append(index)
    for call_id in sorted(by_call):
        _charge_call(session, reported, call_id, by_call[call_id])
    if by_mandate:
        _charge_mandates(session, reporter, reported, by_mandate, now)


def _charge_call(
    session: Session, reported: Sequence[ReportedEvent], call_id: str, indexes: list[int]
) -> None:
    """Count the events against the reservation ``call_id``, once."""
    first = indexes[0]
    row = session.get(ReservationRow, call_id, with_for_update=True)
    for index in indexes:
        event = reported[index].event
        if (
            row is None
            or row.tenant != event.tenant
            or row.model != event.model
            or row.state == ReservationState.RELEASED.value
        ):
            raise _refused(
                index,
                f"call {call_id!r} is not a call of {event.tenant} to {event.model} "
                "that the platform ran",
                "usage_not_authorized",
            )
    assert row is not None
    if row.state == ReservationState.HELD.value:
        # What the platform charges for the call itself is not known yet, and what is
        # reported must fit beside it: the reporter retries the batch once it settled.
        raise Conflict(
            f"event {first}: call {call_id!r} has not settled yet; report it again shortly",
            code="call_in_progress",
            index=first,
        )
    if row.reported_micros is not None:
        raise _refused(
            first, f"usage of call {call_id!r} was reported already", "call_already_reported"
        )
    bound = row.amount_micros - (row.settled_micros or 0)
    total = 0
    for index in indexes:
        total += reported[index].event.amount_micros
        if total > bound:
            raise _refused(
                index,
                f"the usage reported for call {call_id!r} ({total} micro-units) passes "
                f"what was held for it ({bound} left)",
                "authorization_exhausted",
                remaining_micros=bound,
            )
    row.reported_micros = total
    session.flush()


def _charge_mandates(
    session: Session,
    reporter: Reporter,
    reported: Sequence[ReportedEvent],
    indexes: list[int],
    now: datetime,
) -> None:
    """Count each event against a mandate of its consumer for the reporter's tenant:
    one for its model before one for all models, the oldest first, with room left."""
    consumers = sorted({reported[i].event.tenant for i in indexes})
    query = (
        select(UsageAuthorizationRow)
        .where(
            UsageAuthorizationRow.publisher == reporter.tenant,
            UsageAuthorizationRow.consumer.in_(consumers),
            UsageAuthorizationRow.withdrawn_at.is_(None),
        )
        .order_by(UsageAuthorizationRow.id)
        .with_for_update()
    )
    rows = list(session.scalars(query))
    spent = {row.id: row.spent_micros for row in rows}
    for index in indexes:
        event = reported[index].event
        usable = [
            row
            for row in rows
            if row.consumer == event.tenant
            and row.model in (None, event.model)
            and (row.expires_at is None or row.expires_at > now)
            and row.created_at <= event.started_at
        ]
        if not usable:
            raise _refused(
                index,
                f"{event.tenant} has not authorized {reporter.tenant} to report its usage "
                f"of {event.model} (name the call id, or ask for a usage authorization)",
                "usage_not_authorized",
            )
        usable.sort(key=lambda row: (row.model is None, row.id))
        amount = event.amount_micros
        for row in usable:
            if spent[row.id] + amount <= row.cap_micros:
                spent[row.id] += amount
                break
        else:
            raise _refused(
                index,
                f"{event.tenant}'s usage authorization for {reporter.tenant} has "
                f"{max(row.cap_micros - spent[row.id] for row in usable)} micro-units left, "
                f"less than this event's {amount}",
                "authorization_exhausted",
                authorization=usable[0].id,
            )
    for row in rows:
        row.spent_micros = spent[row.id]
    session.flush()
