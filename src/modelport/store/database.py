"""Engine and session setup for SQLite (embedded) and PostgreSQL (distributed)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import CursorResult, Engine, Result, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker


class Database:
    """Owns the engine; hands out sessions whose transaction the caller's boundary ends."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    @property
    def url(self) -> str:
        return self.engine.url.render_as_string(hide_password=False)

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    @contextmanager
    def transaction(self) -> Iterator[Session]:
        """A session in one transaction: committed on success, rolled back on error."""
        with self._sessions() as session, session.begin():
            yield session

    def dispose(self) -> None:
        self.engine.dispose()


def affected_rows(result: Result[*tuple[Any, ...]]) -> int:
    """How many rows an UPDATE or DELETE matched. ``Session.execute`` is typed to return a
    plain ``Result``; for these statements it is a ``CursorResult``, which counts them."""
    if not isinstance(result, CursorResult):
        raise TypeError(f"{type(result).__name__} does not count rows")
    return result.rowcount


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    # Let pysqlite's implicit transaction handling stay out of the way; SQLAlchemy emits BEGIN.
    dbapi_connection.isolation_level = None
    cur = dbapi_connection.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.close()


def _sqlite_begin(conn: Any) -> None:
    # IMMEDIATE takes the write lock up front, so concurrent writers queue on busy_timeout
    # instead of failing on lock upgrade.
    conn.exec_driver_sql("BEGIN IMMEDIATE")


def create_database(url: str, *, echo: bool = False) -> Database:
    """Create a ``Database`` for a SQLAlchemy URL (``sqlite:///...`` or ``postgresql+psycopg://``)."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(
            parsed, echo=echo, connect_args={"check_same_thread": False, "timeout": 30}
        )
        event.listen(engine, "connect", _sqlite_pragmas)
        event.listen(engine, "begin", _sqlite_begin)
    else:
        engine = create_engine(parsed, echo=echo, pool_pre_ping=True, pool_size=10, max_overflow=20)
    return Database(engine)
