"""Idempotency keys for predictions: a repeated key gets the first answer, billed once.

A key is scoped to (caller's tenant, endpoint, key) and stored in the database,
so every gateway sees it. The first request with a key *claims* it (a row in
state ``in_progress`` with a random owner token), runs, and *completes* it with
its response, which is kept ``window_seconds``. Meanwhile:

- a repeat with the same key and the same request (fingerprint) gets the stored
  response (``Replay``): the prediction does not run again and is not billed again;
- a repeat that arrives while the first is still running waits for it, polling,
  until its own deadline (then 409 ``idempotency_key_in_use``, ``Retry-After: 1``);
- a repeat with a different request is refused (422 ``idempotency_key_reused``).

Only successful responses are stored. A first request that fails *releases* its
key, so a retry runs again (nothing was billed). A claim whose holder died is
taken over once its ``locked_until`` passed.
"""

from __future__ import annotations

import asyncio
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta

import anyio.to_thread
from sqlalchemy import ColumnElement, delete, update
from sqlalchemy.exc import IntegrityError

from modelport.clock import Clock
from modelport.errors import Conflict, InvalidInput, Unprocessable
from modelport.store import Database
from modelport.store.database import affected_rows
from modelport.store.tables import IdempotencyKeyRow

KEY_RE = re.compile(r"^[\x21-\x7e]{1,255}$")
IN_PROGRESS = "in_progress"
DONE = "done"


@dataclass(frozen=True)
class Claim:
    """This request holds the key: run, then ``complete`` or ``release``."""

    tenant: str
    endpoint: str
    key: str
    owner: str


@dataclass(frozen=True)
class Replay:
    """The stored response of the first request with this key."""

    status: int
    body: bytes


def check_key(key: str) -> str:
    if not KEY_RE.match(key):
        raise InvalidInput(
            "Idempotency-Key must be 1-255 visible ASCII characters",
            code="invalid_idempotency_key",
        )
    return key


class IdempotencyStore:
    def __init__(
        self,
        database: Database,
        clock: Clock,
        *,
        window_seconds: float = 86400.0,
        poll_seconds: float = 0.02,
    ) -> None:
        self.database = database
        self.clock = clock
        self.window_seconds = window_seconds
        self.poll_seconds = poll_seconds

    async def claim(
        self,
        tenant: str,
        endpoint: str,
        key: str,
        fingerprint: str,
        *,
        hold_seconds: float,
        wait_until: float,
    ) -> Claim | Replay:
        """Claim the key, or get the first response (waiting for it until ``wait_until``,
        a ``monotonic()`` of ``clock``). ``hold_seconds``: how long a claim may go unfinished."""
        check_key(key)
        while True:
            outcome = await anyio.to_thread.run_sync(
                self._try_claim, tenant, endpoint, key, fingerprint, hold_seconds
            )
            if outcome is not None:
                return outcome
            if self.clock.monotonic() >= wait_until:
                raise Conflict(
                    "a request with this Idempotency-Key is still in progress",
                    code="idempotency_key_in_use",
                    retry_after=1,
                )
            await asyncio.sleep(self.poll_seconds)

    def _try_claim(
        self, tenant: str, endpoint: str, key: str, fingerprint: str, hold_seconds: float
    ) -> Claim | Replay | None:
        now = self.clock.now()
        owner = secrets.token_hex(16)
        fresh = {
            "fingerprint": fingerprint,
            "state": IN_PROGRESS,
            "owner": owner,
            "response_status": None,
            "response_body": None,
            "created_at": now,
            "locked_until": now + timedelta(seconds=hold_seconds),
            "expires_at": now + timedelta(seconds=self.window_seconds),
        }
        claim = Claim(tenant, endpoint, key, owner)
        try:
            with self.database.transaction() as session:
                row = session.get(IdempotencyKeyRow, (tenant, endpoint, key), with_for_update=True)
                if row is None:
                    session.add(
                        IdempotencyKeyRow(tenant=tenant, endpoint=endpoint, key=key, **fresh)
                    )
                    return claim
                if row.expires_at <= now:
                    _assign(row, fresh)
                    return claim
                if row.fingerprint != fingerprint:
                    raise Unprocessable(
                        "this Idempotency-Key was used for a different request",
                        code="idempotency_key_reused",
                    )
                if row.state == DONE:
                    assert row.response_status is not None and row.response_body is not None
                    return Replay(row.response_status, row.response_body)
                if row.locked_until <= now:
                    _assign(row, fresh)  # its holder is gone: take it over
                    return claim
                return None
        except IntegrityError:
            return None  # another request inserted it first: look again

    def complete(self, claim: Claim, status: int, body: bytes) -> None:
        """Store the response of a claim (it is replayed until the window closes)."""
        with self.database.transaction() as session:
            session.execute(
                update(IdempotencyKeyRow)
                .where(*_claimed(claim))
                .values(
                    state=DONE,
                    response_status=status,
                    response_body=body,
                    expires_at=self.clock.now() + timedelta(seconds=self.window_seconds),
                )
            )

    def release(self, claim: Claim) -> None:
        """Forget a claim whose request failed, so that a retry runs again."""
        with self.database.transaction() as session:
            session.execute(delete(IdempotencyKeyRow).where(*_claimed(claim)))

    def purge(self) -> int:
        """Remove expired keys; how many went."""
        with self.database.transaction() as session:
            result = session.execute(
                delete(IdempotencyKeyRow).where(IdempotencyKeyRow.expires_at <= self.clock.now())
            )
            return affected_rows(result)


def _claimed(claim: Claim) -> tuple[ColumnElement[bool], ...]:
    return (
        IdempotencyKeyRow.tenant == claim.tenant,
        IdempotencyKeyRow.endpoint == claim.endpoint,
        IdempotencyKeyRow.key == claim.key,
        IdempotencyKeyRow.owner == claim.owner,
    )


def _assign(row: IdempotencyKeyRow, values: Mapping[str, object]) -> None:
    for name, value in values.items():
        setattr(row, name, value)
