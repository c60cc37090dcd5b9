"""The webhooks service: what other services and the API call, and the background
deliverer.

- ``check_url``: refuse a URL the policy forbids, when a webhook is given (400).
- ``enqueue``: record a message to post to a tenant's URL (the tenant's signing
  secret is made on first use); the deliverer posts it. ``enqueue_in`` records it in
  the caller's transaction (an outbox row: it commits with the change it reports, or
  neither does); ``wake`` after that commit posts it at once.
- ``rotate_secret`` / ``secret_info``: the tenant's signing secrets (a value is shown
  only when made); the replaced secret keeps signing for ``secret_overlap``.
- ``deliveries`` / ``delivery`` / ``redeliver``: the delivery log.
- ``deliver_due``: one step of the deliverer (``start`` runs it on a background loop):
  claim due deliveries, post each (signed now, the URL checked again), record the
  attempt, schedule the next with backoff, or give up after ``retry_window``.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import orjson
from sqlalchemy.orm import Session

from modelport.background.loops import BackgroundLoop
from modelport.background.pools import ThreadPools
from modelport.clock import Clock
from modelport.errors import Conflict, InvalidInput, ModelportError
from modelport.ids import unique_id
from modelport.logs import log_event
from modelport.observability import tracing
from modelport.webhooks.backoff import retry_delay
from modelport.webhooks.repository import WebhookRepository
from modelport.webhooks.sender import Sender
from modelport.webhooks.signing import new_secret, signed_headers
from modelport.webhooks.types import (
    Claimed,
    Delivery,
    DeliveryDetail,
    DeliveryPage,
    DeliveryStatus,
    IssuedSecret,
    Outcome,
    SecretInfo,
)
from modelport.webhooks.urls import Target, UrlPolicy

_log = logging.getLogger(__name__)

MAX_BODY_BYTES = 256 * 1024
MAX_PAGE = 200


@dataclass(frozen=True)
class DeliveryConfig:
    """How deliveries are retried and run (the ``webhook_*`` settings)."""

    retry_window: timedelta = timedelta(hours=24)
    retry_base_seconds: float = 5.0
    retry_max_seconds: float = 3600.0
    secret_overlap: timedelta = timedelta(hours=24)
    lease: timedelta = timedelta(seconds=60)
    batch: int = 8
    """Deliveries claimed, and posted at once, per step."""
    poll_interval_seconds: float = 1.0
    uniform: Callable[[float, float], float] | None = field(default=None, compare=False)
    """The jitter's random draw (tests fix it); default ``random.uniform``."""


class WebhookService:
    def __init__(
        self,
        repository: WebhookRepository,
        policy: UrlPolicy,
        sender: Sender,
        clock: Clock,
        config: DeliveryConfig | None = None,
        pools: ThreadPools | None = None,
    ) -> None:
        self._repo = repository
        self._policy = policy
        self._sender = sender
        self._clock = clock
        self._config = config or DeliveryConfig()
        # The attempts of a batch run at once, on the process's "webhook" pool (or a
        # private one, closed with this service, when none is handed in).
        self._own_pools = ThreadPools() if pools is None else None
        pools = pools or self._own_pools
        assert pools is not None
        self._pool = pools.get("webhook", self._config.batch)
        self._loop = BackgroundLoop(
            "webhook-deliveries", self.deliver_due, self._config.poll_interval_seconds
        )

    # ---- submission

    def check_url(self, url: str) -> None:
        """Refuse (``InvalidInput``, 400, ``webhook_url_*``) a URL no webhook may go to."""
        self._policy.check(url)

    def enqueue(
        self,
        tenant: str,
        url: str,
        event_type: str,
        payload: Mapping[str, Any],
        subject: str,
        *,
        dedupe_key: str | None = None,
    ) -> str:
        """Record ``payload`` to post to ``url`` as an ``event_type`` event about
        ``subject``; answers the delivery's id. The body is Standard Webhooks' envelope
        ``{"type", "timestamp", "data"}``. With ``dedupe_key`` (e.g. ``job_1:succeeded``),
        calling again with the same key answers the first call's delivery and sends
        nothing more: a caller that resumes after a crash may call it again safely."""
        self._policy.check(url)
        delivery = self._message(tenant, url, event_type, payload, subject, dedupe_key)
        self.ensure_secret(tenant)
        recorded = self._repo.add_delivery(delivery, dedupe_key)
        self._loop.kick()
        return recorded

    def enqueue_in(
        self,
        session: Session,
        tenant: str,
        url: str,
        event_type: str,
        payload: Mapping[str, Any],
        subject: str,
        *,
        dedupe_key: str | None = None,
    ) -> str:
        """``enqueue`` in the caller's transaction, with no I/O but the database: the URL
        is not resolved here (the caller checked it when it was given, and every
        attempt checks it again), so a transaction holding locks never waits on DNS.
        Call ``wake`` once it committed. An invalid message raises, and the caller's
        transaction rolls back with it."""
        delivery = self._message(tenant, url, event_type, payload, subject, dedupe_key)
        self._repo.add_secret_in(
            session,
            tenant,
            new_secret(),
            self._clock.now(),
            self._config.secret_overlap,
            only_if_none=True,
        )
        return self._repo.add_delivery_in(session, delivery, dedupe_key)

    def wake(self) -> None:
        """Look for due deliveries now (one was just committed)."""
        self._loop.kick()

    def _message(
        self,
        tenant: str,
        url: str,
        event_type: str,
        payload: Mapping[str, Any],
        subject: str,
        dedupe_key: str | None,
    ) -> Delivery:
        if not event_type or len(event_type) > 128:
            raise InvalidInput("an event type is 1 to 128 characters", code="invalid_request")
        if len(subject) > 128:
            raise InvalidInput("a subject is at most 128 characters", code="invalid_request")
        if dedupe_key is not None and not 0 < len(dedupe_key) <= 160:
            raise InvalidInput("a dedupe key is 1 to 160 characters", code="invalid_request")
        now = self._clock.now()
        body = orjson.dumps(
            {"type": event_type, "timestamp": now.isoformat(), "data": dict(payload)}
        ).decode()
        if len(body) > MAX_BODY_BYTES:
            raise InvalidInput(
                f"a webhook payload is at most {MAX_BODY_BYTES} bytes",
                code="webhook_payload_too_large",
            )
        return Delivery(
            id=unique_id(),
            tenant=tenant,
            message_id=f"msg_{unique_id()}",
            url=url,
            event_type=event_type,
            subject=subject,
            body=body,
            status=DeliveryStatus.PENDING,
            attempts=0,
            created_at=now,
            next_attempt_at=now,
            give_up_at=now + self._config.retry_window,
            finished_at=None,
            last_status_code=None,
            last_error=None,
            redelivery_of=None,
            trace_context=tracing.carrier() or None,
        )

    # ---- secrets

    def ensure_secret(self, tenant: str) -> None:
        """Make the tenant's first secret unless it has one (its value is then shown to
        nobody: the tenant rotates to learn one)."""
        self._repo.add_secret(
            tenant, new_secret(), self._clock.now(), self._config.secret_overlap, only_if_none=True
        )

    def rotate_secret(self, tenant: str) -> IssuedSecret:
        """A new secret for ``tenant`` (its first, or one replacing the current one, which
        keeps signing for the overlap); the only time its value is answered."""
        secret = new_secret()
        made = self._repo.add_secret(
            tenant, secret, self._clock.now(), self._config.secret_overlap, only_if_none=False
        )
        assert made is not None
        info, first = made
        return IssuedSecret(secret=secret, info=info, created=first)

    def secret_info(self, tenant: str) -> SecretInfo:
        """The tenant's secrets, without their values (404 when it has none)."""
        return self._repo.secret_info(tenant, self._clock.now())

    # ---- the delivery log

    def deliveries(
        self,
        tenant: str,
        *,
        subject: str | None = None,
        status: DeliveryStatus | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> DeliveryPage:
        return self._repo.page(
            tenant,
            subject=subject,
            status=status,
            limit=max(1, min(limit, MAX_PAGE)),
            cursor=cursor,
        )

    def delivery(self, delivery_id: str) -> DeliveryDetail:
        return self._repo.get(delivery_id)

    def redeliver(self, delivery_id: str) -> Delivery:
        """A new delivery of a finished delivery's message: the same ``webhook-id`` and
        body to the same URL, with a new retry window. 409 while it is still pending."""
        original = self._repo.get(delivery_id).delivery
        if original.status is DeliveryStatus.PENDING:
            raise Conflict(
                "the delivery is still being tried; redeliver it once it is delivered or failed",
                code="webhook_delivery_pending",
            )
        self._policy.check(original.url)
        now = self._clock.now()
        again = Delivery(
            id=unique_id(),
            tenant=original.tenant,
            message_id=original.message_id,
            url=original.url,
            event_type=original.event_type,
            subject=original.subject,
            body=original.body,
            status=DeliveryStatus.PENDING,
            attempts=0,
            created_at=now,
            next_attempt_at=now,
            give_up_at=now + self._config.retry_window,
            finished_at=None,
            last_status_code=None,
            last_error=None,
            redelivery_of=original.id,
            trace_context=original.trace_context,
        )
        self._repo.add_delivery(again)
        self._loop.kick()
        return again

    # ---- the deliverer

    def deliver_due(self) -> int:
        """Claim the due deliveries (up to a batch), post them at once, record each
        attempt; how many were attempted."""
        config = self._config
        claimed = self._repo.claim(self._clock.now(), unique_id(), config.lease, config.batch)
        if claimed:
            list(self._pool.map(self._attempt, claimed))
        return len(claimed)

    def _attempt(self, claimed: Claimed) -> None:
        delivery = claimed.delivery
        attempted_at = self._clock.now()
        outcome = self._post(delivery, attempted_at.timestamp())
        now = self._clock.now()
        next_at = None
        if not outcome.ok:
            delay = retry_delay(
                delivery.attempts + 1,
                base_seconds=self._config.retry_base_seconds,
                max_seconds=self._config.retry_max_seconds,
                uniform=self._config.uniform or random.uniform,
            )
            candidate = now + timedelta(seconds=delay)
            next_at = candidate if candidate <= delivery.give_up_at else None
        recorded = self._repo.record(claimed, outcome, attempted_at, next_at, now)
        if recorded and not outcome.ok and next_at is None:
            log_event(
                _log,
                "webhook.failed",
                level=logging.WARNING,
                delivery=delivery.id,
                tenant=delivery.tenant,
                subject=delivery.subject,
                attempts=delivery.attempts + 1,
                error=outcome.error,
            )

    def _post(self, delivery: Delivery, timestamp: float) -> Outcome:
        try:
            # Again at every attempt: the name may resolve elsewhere by now.
            target: Target = self._policy.check(delivery.url)
            signing = self._repo.signing_secrets(delivery.tenant, self._clock.now())
        except ModelportError as exc:
            return Outcome(None, f"{exc.code}: {exc.message}"[:500], 0)
        if not signing:
            return Outcome(None, "webhook_secret_not_found: the tenant has no secret", 0)
        body = delivery.body.encode()
        headers = signed_headers(signing, delivery.message_id, int(timestamp), body)
        if delivery.trace_context:
            headers.update(delivery.trace_context)  # traceparent, tracestate
        return self._sender.send(target, body, headers)

    def drain(self, rounds: int = 100) -> int:
        """Attempt every delivery due now (tests, shutdown); how many attempts."""
        total = 0
        for _ in range(rounds):
            done = self.deliver_due()
            total += done
            if not done:
                break
        return total

    def start(self) -> None:
        self._loop.start()

    def stop(self) -> None:
        self._loop.stop()

    def close(self) -> None:
        self.stop()
        if self._own_pools is not None:
            self._own_pools.close()
        self._sender.close()
