"""Console sessions at rest, on SQLite and PostgreSQL: the credential sealed, the row
keyed by a hash of the cookie's id, expiry, sign-out, rotation of the sealing key."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from cryptography.fernet import Fernet
from sqlalchemy import select

from modelport.console.sessions import ConsoleSessions
from modelport.errors import Unavailable
from modelport.store import Database, create_database
from modelport.store.sealed import rotate
from modelport.store.secrets import SecretBox
from modelport.store.tables import ConsoleSessionRow
from tests.conftest import TEST_SECRET_KEY

KEY = "mp_live_" + "k" * 16 + "_" + "s" * 40


class Clock:
    def __init__(self) -> None:
        self.at = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.at


@pytest.fixture
def database(database_url: str) -> Iterator[Database]:
    db = create_database(database_url)
    yield db
    db.dispose()


def sessions(database: Database, clock: Clock, box: SecretBox | None = None) -> ConsoleSessions:
    return ConsoleSessions(
        database, box or SecretBox([TEST_SECRET_KEY]), ttl_seconds=3600, now=clock
    )


def rows(database: Database) -> list[ConsoleSessionRow]:
    with database.transaction() as db:
        return list(db.scalars(select(ConsoleSessionRow)).all())


def test_a_session_is_found_by_its_id_and_holds_the_key_sealed(database: Database) -> None:
    clock = Clock()
    store = sessions(database, clock)
    started = store.start(KEY, "beta")
    found = store.find(started.session_id)
    assert found is not None and (found.credential, found.tenant) == (KEY, "beta")
    assert found.csrf_token == started.session.csrf_token
    [row] = rows(database)
    assert row.credential.startswith("fernet:v1:") and KEY not in row.credential
    assert row.id_hash != started.session_id  # a copy of the table names no cookie
    for unknown in (None, "", "x" * 500, started.session_id + "x"):
        assert store.find(unknown) is None


def test_a_session_expires_and_expired_ones_are_swept(database: Database) -> None:
    clock = Clock()
    store = sessions(database, clock)
    old = store.start(KEY, "beta")
    clock.at += timedelta(seconds=3599)
    assert store.find(old.session_id) is not None
    clock.at += timedelta(seconds=1)
    assert store.find(old.session_id) is None
    new = store.start(KEY, "beta")  # sweeps the expired one
    assert [r.id_hash for r in rows(database)] != [] and len(rows(database)) == 1
    assert store.find(new.session_id) is not None


def test_sign_out_deletes_the_session(database: Database) -> None:
    store = sessions(database, Clock())
    kept, ended = store.start(KEY, "beta"), store.start(KEY, "gamma")
    store.end(ended.session_id)
    store.end(None)
    assert store.find(ended.session_id) is None and store.find(kept.session_id) is not None


def test_without_a_secret_key_no_session_starts(database: Database) -> None:
    store = sessions(database, Clock(), SecretBox([]))
    with pytest.raises(Unavailable) as refused:
        store.start(KEY, "beta")
    assert refused.value.code == "secret_key_required"
    assert rows(database) == []


def test_rotation_reseals_session_credentials(database: Database) -> None:
    clock = Clock()
    started = sessions(database, clock).start(KEY, "beta")
    newest = Fernet.generate_key().decode()
    box = SecretBox([newest, TEST_SECRET_KEY])
    done = rotate(database, box)
    assert done.resealed["console_sessions.credential"] == 1
    found = sessions(database, clock, SecretBox([newest])).find(started.session_id)
    assert found is not None and found.credential == KEY
