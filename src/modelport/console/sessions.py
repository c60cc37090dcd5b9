"""The web console's signed-in sessions: a random id in the browser's cookie, and on
the server the credential it signed in with, sealed, with a CSRF token and an expiry."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import delete, select

from modelport.store.database import Database
from modelport.store.secrets import SecretBox
from modelport.store.tables import ConsoleSessionRow


@dataclass(frozen=True)
class ConsoleSession:
    """A live session: what a page needs to call the API on the person's behalf."""

    credential: str
    """The API key it signed in with (opened from its sealed form)."""
    tenant: str | None
    """The key's tenant; None for a platform-wide key."""
    csrf_token: str
    expires_at: datetime


@dataclass(frozen=True)
class StartedSession:
    """A new session: ``session_id`` goes into the cookie, and nowhere else."""

    session_id: str
    session: ConsoleSession


def _hash(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


def tokens_match(expected: str, given: str | None) -> bool:
    """A constant-time comparison of a CSRF token with what a form sent."""
    return given is not None and hmac.compare_digest(expected.encode(), given.encode())


class ConsoleSessions:
    """Starts, finds and ends console sessions in the ``console_sessions`` table."""

    def __init__(
        self,
        database: Database,
        box: SecretBox,
        *,
        ttl_seconds: float,
        now: Callable[[], datetime],
    ) -> None:
        self._database = database
        self._box = box
        self._ttl = timedelta(seconds=ttl_seconds)
        self._now = now

    @property
    def ttl_seconds(self) -> float:
        """How long a session lasts (the cookie's max age too)."""
        return self._ttl.total_seconds()

    def start(self, credential: str, tenant: str | None) -> StartedSession:
        """A new session for ``credential`` (already checked against the API); expired
        sessions are swept on the way, so the table holds only live ones."""
        session_id = secrets.token_urlsafe(32)
        now = self._now()
        session = ConsoleSession(
            credential=credential,
            tenant=tenant,
            csrf_token=secrets.token_urlsafe(32),
            expires_at=now + self._ttl,
        )
        sealed = self._box.seal(credential)  # before the transaction: it may refuse
        with self._database.transaction() as db:
            db.execute(delete(ConsoleSessionRow).where(ConsoleSessionRow.expires_at <= now))
            db.add(
                ConsoleSessionRow(
                    id_hash=_hash(session_id),
                    credential=sealed,
                    tenant=tenant,
                    csrf_token=session.csrf_token,
                    created_at=now,
                    expires_at=session.expires_at,
                )
            )
        return StartedSession(session_id=session_id, session=session)

    def find(self, session_id: str | None) -> ConsoleSession | None:
        """The live session of a cookie's id; None when unknown or expired."""
        if not session_id or len(session_id) > 128:
            return None
        with self._database.transaction() as db:
            row = db.scalars(
                select(ConsoleSessionRow).where(ConsoleSessionRow.id_hash == _hash(session_id))
            ).one_or_none()
            if row is None or row.expires_at <= self._now():
                return None
            return ConsoleSession(
                credential=self._box.open(row.credential),
                tenant=row.tenant,
                csrf_token=row.csrf_token,
                expires_at=row.expires_at,
            )

    def end(self, session_id: str | None) -> None:
        """Sign out: the session's row (and its sealed credential) is deleted."""
        if not session_id:
            return
        with self._database.transaction() as db:
            db.execute(
                delete(ConsoleSessionRow).where(ConsoleSessionRow.id_hash == _hash(session_id))
            )
