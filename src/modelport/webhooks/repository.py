"""The webhooks tables: secrets, deliveries and attempts. Returns frozen records.

Claiming: a deliverer takes due deliveries for a lease in one transaction (PostgreSQL:
``FOR UPDATE SKIP LOCKED``, so deliverers in several processes take disjoint rows;
SQLite: every write transaction begins ``IMMEDIATE``, so claims are serialized). A
delivery whose deliverer died is due again once its lease ends: at least once.
"""

from __future__ import annotations

import base64
from datetime import datetime, timedelta

from sqlalchemy import and_, func, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from modelport.errors import InvalidInput, NotFound
from modelport.store import Database
from modelport.store.database import affected_rows
from modelport.store.secrets import SecretBox
from modelport.store.tables import WebhookAttemptRow, WebhookDeliveryRow, WebhookSecretRow
from modelport.webhooks.types import (
    Attempt,
    Claimed,
    Delivery,
    DeliveryDetail,
    DeliveryPage,
    DeliveryStatus,
    Outcome,
    SecretInfo,
)


def delivery_not_found(delivery_id: str) -> NotFound:
    return NotFound(
        f"webhook delivery {delivery_id[:64]!r} not found",
        code="webhook_delivery_not_found",
    )


def secret_not_found(tenant: str) -> NotFound:
    return NotFound(
        f"tenant {tenant!r} has no webhook signing secret yet: POST /api/webhooks/secret makes one",
        code="webhook_secret_not_found",
    )


def _delivery(row: WebhookDeliveryRow) -> Delivery:
    return Delivery(
        id=row.id,
        tenant=row.tenant,
        message_id=row.message_id,
        url=row.url,
        event_type=row.event_type,
        subject=row.subject,
        body=row.body,
        status=DeliveryStatus(row.status),
        attempts=row.attempts,
        created_at=row.created_at,
        next_attempt_at=row.next_attempt_at,
        give_up_at=row.give_up_at,
        finished_at=row.finished_at,
        last_status_code=row.last_status_code,
        last_error=row.last_error,
        redelivery_of=row.redelivery_of,
        trace_context=dict(row.trace_context) if row.trace_context else None,
    )


def _attempt(row: WebhookAttemptRow) -> Attempt:
    return Attempt(
        number=row.number,
        attempted_at=row.attempted_at,
        status_code=row.status_code,
        error=row.error,
        duration_ms=row.duration_ms,
    )


def encode_cursor(delivery: Delivery) -> str:
    raw = f"{delivery.created_at.isoformat()}|{delivery.id}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        moment, _, delivery_id = raw.partition("|")
        at = datetime.fromisoformat(moment)
        if at.tzinfo is None or not delivery_id:
            raise ValueError(cursor)
    except ValueError:
        raise InvalidInput(
            "invalid cursor: pass back the next_cursor of a previous page",
            code="invalid_cursor",
            field="cursor",
        ) from None
    return at, delivery_id


class WebhookRepository:
    """Secrets (sealed at rest by ``box``), deliveries and their attempts."""

    def __init__(self, database: Database, box: SecretBox) -> None:
        self._db = database
        self._box = box

    # ---- secrets

    def signing_secrets(self, tenant: str, now: datetime) -> list[str]:
        """The tenant's secrets that sign now, newest first."""
        with self._db.transaction() as session:
            rows = session.scalars(
                select(WebhookSecretRow)
                .where(
                    WebhookSecretRow.tenant == tenant,
                    or_(WebhookSecretRow.retired_at.is_(None), WebhookSecretRow.retired_at > now),
                )
                .order_by(WebhookSecretRow.id.desc())
            ).all()
            return [self._box.open(row.value) for row in rows]

    def secret_info(self, tenant: str, now: datetime) -> SecretInfo:
        with self._db.transaction() as session:
            return self._info(session, tenant, now)

    def _info(self, session: Session, tenant: str, now: datetime) -> SecretInfo:
        rows = session.scalars(
            select(WebhookSecretRow)
            .where(
                WebhookSecretRow.tenant == tenant,
                or_(WebhookSecretRow.retired_at.is_(None), WebhookSecretRow.retired_at > now),
            )
            .order_by(WebhookSecretRow.id.desc())
        ).all()
        if not rows:
            raise secret_not_found(tenant)
        retiring = [row.retired_at for row in rows[1:] if row.retired_at is not None]
        return SecretInfo(
            tenant=tenant,
            created_at=rows[0].created_at,
            previous_valid_until=max(retiring) if retiring else None,
            signing_secrets=len(rows),
        )

    def add_secret(
        self, tenant: str, secret: str, now: datetime, overlap: timedelta, *, only_if_none: bool
    ) -> tuple[SecretInfo, bool] | None:
        """Make ``secret`` the tenant's current one; the one it replaces keeps signing
        for ``overlap``. With ``only_if_none``, nothing happens (None) when the tenant
        has a current secret. Answers the new state and whether it was the first."""
        with self._db.transaction() as session:
            return self.add_secret_in(
                session, tenant, secret, now, overlap, only_if_none=only_if_none
            )

    def add_secret_in(
        self,
        session: Session,
        tenant: str,
        secret: str,
        now: datetime,
        overlap: timedelta,
        *,
        only_if_none: bool,
    ) -> tuple[SecretInfo, bool] | None:
        """``add_secret`` in the caller's transaction."""
        current = session.scalars(
            select(WebhookSecretRow)
            .where(WebhookSecretRow.tenant == tenant, WebhookSecretRow.retired_at.is_(None))
            .with_for_update()
        ).all()
        if current and only_if_none:
            return None
        for row in current:
            row.retired_at = now + overlap
        session.add(
            WebhookSecretRow(
                tenant=tenant, value=self._box.seal(secret), created_at=now, retired_at=None
            )
        )
        session.flush()
        return self._info(session, tenant, now), not current

    # ---- deliveries

    def add_delivery(self, delivery: Delivery, dedupe_key: str | None = None) -> str:
        """Record ``delivery``; answers its id, or with a ``dedupe_key`` the tenant used
        before, the id of the delivery made then (nothing new is recorded)."""
        if dedupe_key is not None:
            existing = self._by_key(delivery.tenant, dedupe_key)
            if existing is not None:
                return existing
        try:
            self._insert(delivery, dedupe_key)
        except IntegrityError:
            existing = self._by_key(delivery.tenant, dedupe_key) if dedupe_key else None
            if existing is None:
                raise
            return existing  # another process recorded it first
        return delivery.id

    def add_delivery_in(
        self, session: Session, delivery: Delivery, dedupe_key: str | None = None
    ) -> str:
        """``add_delivery`` in the caller's transaction: the delivery is an outbox row
        that commits with the caller's other writes, or not at all. The caller serialises
        writers of one ``dedupe_key`` (a job's end holds the job's row)."""
        if dedupe_key is not None:
            existing = _by_key(session, delivery.tenant, dedupe_key)
            if existing is not None:
                return existing
        _insert(session, delivery, dedupe_key)
        session.flush()
        return delivery.id

    def _by_key(self, tenant: str, dedupe_key: str) -> str | None:
        with self._db.transaction() as session:
            return _by_key(session, tenant, dedupe_key)

    def _insert(self, delivery: Delivery, dedupe_key: str | None) -> None:
        with self._db.transaction() as session:
            _insert(session, delivery, dedupe_key)

    def get(self, delivery_id: str) -> DeliveryDetail:
        with self._db.transaction() as session:
            row = session.get(WebhookDeliveryRow, delivery_id[:32])
            if row is None or row.id != delivery_id:
                raise delivery_not_found(delivery_id)
            attempts = session.scalars(
                select(WebhookAttemptRow)
                .where(WebhookAttemptRow.delivery_id == delivery_id)
                .order_by(WebhookAttemptRow.number, WebhookAttemptRow.id)
            ).all()
            return DeliveryDetail(_delivery(row), tuple(_attempt(a) for a in attempts))

    def page(
        self,
        tenant: str,
        *,
        subject: str | None,
        status: DeliveryStatus | None,
        limit: int,
        cursor: str | None,
    ) -> DeliveryPage:
        """The tenant's deliveries, newest first."""
        query = select(WebhookDeliveryRow).where(WebhookDeliveryRow.tenant == tenant)
        if subject is not None:
            query = query.where(WebhookDeliveryRow.subject == subject)
        if status is not None:
            query = query.where(WebhookDeliveryRow.status == status.value)
        if cursor:
            at, last_id = decode_cursor(cursor)
            query = query.where(
                or_(
                    WebhookDeliveryRow.created_at < at,
                    and_(WebhookDeliveryRow.created_at == at, WebhookDeliveryRow.id < last_id),
                )
            )
        query = query.order_by(
            WebhookDeliveryRow.created_at.desc(), WebhookDeliveryRow.id.desc()
        ).limit(limit + 1)
        with self._db.transaction() as session:
            items = [_delivery(row) for row in session.scalars(query).all()]
        more = len(items) > limit
        items = items[:limit]
        return DeliveryPage(tuple(items), encode_cursor(items[-1]) if more else None)

    def claim(self, now: datetime, lease: str, lease_for: timedelta, limit: int) -> list[Claimed]:
        """Take up to ``limit`` due deliveries, soonest first, until ``now + lease_for``."""
        with self._db.transaction() as session:
            query = (
                select(WebhookDeliveryRow.id)
                .where(
                    WebhookDeliveryRow.status == DeliveryStatus.PENDING.value,
                    WebhookDeliveryRow.next_attempt_at <= now,
                    or_(
                        WebhookDeliveryRow.claimed_until.is_(None),
                        WebhookDeliveryRow.claimed_until <= now,
                    ),
                )
                .order_by(WebhookDeliveryRow.next_attempt_at)
                .limit(limit)
            )
            if self._db.dialect == "postgresql":
                query = query.with_for_update(skip_locked=True)
            ids = list(session.scalars(query).all())
            if not ids:
                return []
            session.execute(
                update(WebhookDeliveryRow)
                .where(WebhookDeliveryRow.id.in_(ids))
                .values(claimed_until=now + lease_for, lease=lease)
            )
            rows = session.scalars(
                select(WebhookDeliveryRow)
                .where(WebhookDeliveryRow.id.in_(ids))
                .order_by(WebhookDeliveryRow.next_attempt_at)
            ).all()
            return [Claimed(_delivery(row), lease) for row in rows]

    def record(
        self,
        claimed: Claimed,
        outcome: Outcome,
        attempted_at: datetime,
        next_attempt_at: datetime | None,
        now: datetime,
    ) -> bool:
        """Log an attempt and move its delivery on: delivered (``outcome.ok``), due
        again at ``next_attempt_at``, or failed (``next_attempt_at`` None). Answers False,
        logging the attempt only, when the lease was lost to another deliverer."""
        delivery = claimed.delivery
        with self._db.transaction() as session:
            number = 1 + (
                session.scalar(
                    select(func.count())
                    .select_from(WebhookAttemptRow)
                    .where(WebhookAttemptRow.delivery_id == delivery.id)
                )
                or 0
            )
            session.add(
                WebhookAttemptRow(
                    delivery_id=delivery.id,
                    number=number,
                    attempted_at=attempted_at,
                    status_code=outcome.status_code,
                    error=outcome.error,
                    duration_ms=outcome.duration_ms,
                )
            )
            if outcome.ok:
                status, due, finished = DeliveryStatus.DELIVERED, None, now
            elif next_attempt_at is None:
                status, due, finished = DeliveryStatus.FAILED, None, now
            else:
                status, due, finished = DeliveryStatus.PENDING, next_attempt_at, None
            result = session.execute(
                update(WebhookDeliveryRow)
                .where(
                    WebhookDeliveryRow.id == delivery.id,
                    WebhookDeliveryRow.lease == claimed.lease,
                    WebhookDeliveryRow.status == DeliveryStatus.PENDING.value,
                )
                .values(
                    status=status.value,
                    attempts=number,
                    next_attempt_at=due,
                    finished_at=finished,
                    claimed_until=None,
                    lease=None,
                    last_status_code=outcome.status_code,
                    last_error=outcome.error,
                )
            )
            return affected_rows(result) == 1

    def pending_count(self) -> int:
        with self._db.transaction() as session:
            return int(
                session.scalar(
                    select(func.count())
                    .select_from(WebhookDeliveryRow)
                    .where(WebhookDeliveryRow.status == DeliveryStatus.PENDING.value)
                )
                or 0
            )


def _by_key(session: Session, tenant: str, dedupe_key: str) -> str | None:
    return session.scalar(
        select(WebhookDeliveryRow.id).where(
            WebhookDeliveryRow.tenant == tenant, WebhookDeliveryRow.dedupe_key == dedupe_key
        )
    )


def _insert(session: Session, delivery: Delivery, dedupe_key: str | None) -> None:
    session.add(
        WebhookDeliveryRow(
            id=delivery.id,
            tenant=delivery.tenant,
            message_id=delivery.message_id,
            url=delivery.url,
            event_type=delivery.event_type,
            subject=delivery.subject,
            body=delivery.body,
            status=delivery.status.value,
            attempts=delivery.attempts,
            created_at=delivery.created_at,
            next_attempt_at=delivery.next_attempt_at,
            give_up_at=delivery.give_up_at,
            claimed_until=None,
            lease=None,
            finished_at=delivery.finished_at,
            last_status_code=delivery.last_status_code,
            last_error=delivery.last_error,
            redelivery_of=delivery.redelivery_of,
            trace_context=delivery.trace_context,
            dedupe_key=dedupe_key,
        )
    )
