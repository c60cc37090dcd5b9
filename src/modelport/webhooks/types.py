"""Plain records of the webhooks package (no I/O)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum


class DeliveryStatus(StrEnum):
    PENDING = "pending"
    """Waiting for its next attempt (or being attempted now)."""
    DELIVERED = "delivered"
    """The receiver answered 2xx."""
    FAILED = "failed"
    """No 2xx within the retry window: given up."""


@dataclass(frozen=True)
class SecretInfo:
    """What may be shown of a tenant's signing secrets: never their values."""

    tenant: str
    created_at: datetime
    """When the current secret was made."""
    previous_valid_until: datetime | None
    """Until when the secret it replaced still signs too (rotation overlap); None when
    no earlier secret still signs."""
    signing_secrets: int
    """How many secrets sign each delivery now (2 during an overlap)."""


@dataclass(frozen=True)
class IssuedSecret:
    """A secret just made (first use or rotation): the only time its value is shown."""

    secret: str
    """``whsec_<base64>``."""
    info: SecretInfo
    created: bool
    """True for the tenant's first secret, False for a rotation."""


@dataclass(frozen=True)
class Attempt:
    """One try at posting a delivery."""

    number: int
    attempted_at: datetime
    status_code: int | None
    """The receiver's HTTP status; None when no answer came (connection, timeout,
    refused address)."""
    error: str | None
    duration_ms: int


@dataclass(frozen=True)
class Delivery:
    """One message to one URL, tried until delivered or the retry window ends. A
    redelivery is a new delivery of the same message (same ``message_id``, body)."""

    id: str
    tenant: str
    message_id: str
    """The ``webhook-id`` header: the same on every attempt and redelivery."""
    url: str
    event_type: str
    subject: str
    """What the event is about (e.g. a job id): the delivery log is filtered by it."""
    body: str
    """The exact JSON posted: ``{"type", "timestamp", "data"}``."""
    status: DeliveryStatus
    attempts: int
    created_at: datetime
    next_attempt_at: datetime | None
    """None once delivered or failed."""
    give_up_at: datetime
    finished_at: datetime | None
    last_status_code: int | None
    last_error: str | None
    redelivery_of: str | None
    trace_context: dict[str, str] | None = None
    """The W3C trace context of what enqueued it: sent with every attempt, so the
    receiver may continue the trace."""


@dataclass(frozen=True)
class DeliveryDetail:
    delivery: Delivery
    attempts: tuple[Attempt, ...]


@dataclass(frozen=True)
class DeliveryPage:
    items: tuple[Delivery, ...]
    next_cursor: str | None


@dataclass(frozen=True)
class Claimed:
    """A due delivery taken by one deliverer for its lease."""

    delivery: Delivery
    lease: str


@dataclass(frozen=True)
class Outcome:
    """What one attempt came to (before it is recorded)."""

    status_code: int | None
    error: str | None
    duration_ms: int

    @property
    def ok(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300
