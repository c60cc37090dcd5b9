"""Apply Alembic migrations programmatically (``modelport migrate`` and embedded start)."""

from __future__ import annotations

import contextlib
import fcntl
import functools
from collections.abc import Iterator
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
_PG_LOCK_KEY = 0x6D6F64656C706F  # "modelpo": one advisory lock for every migrator


def alembic_config(url: str) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def upgrade(url: str, revision: str = "head") -> None:
    """Bring the database to ``revision``, one migrator at a time: processes that
    start together (worker processes, gateways rolling out) would otherwise race to
    create the same tables, and all but one would fail."""
    if revision == "head" and current_revision(url) == head_revision():
        return  # nothing to do: every start of an up-to-date database (no lock, no scripts)
    with migration_lock(url):
        command.upgrade(alembic_config(url), revision)


@functools.cache
def head_revision() -> str | None:
    """The latest migration's revision (the scripts are read once a process)."""
    return ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()


@contextlib.contextmanager
def migration_lock(url: str) -> Iterator[None]:
    """Hold the database's migration lock: a ``flock`` beside a SQLite file, a
    session advisory lock on PostgreSQL (released with its connection, also when the
    process dies)."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        database = parsed.database
        if not database or database == ":memory:":
            yield
            return
        lock_path = Path(database).with_name(Path(database).name + ".migrate-lock")
        with lock_path.open("a") as lock_file:
            fcntl.flock(lock_file, fcntl.LOCK_EX)
            yield  # closing the file releases the lock
        return
    if parsed.get_backend_name() == "postgresql":
        engine = create_engine(url, poolclass=NullPool)
        try:
            with engine.connect() as conn:
                conn.execute(text("SELECT pg_advisory_lock(:key)"), {"key": _PG_LOCK_KEY})
                conn.commit()
                try:
                    yield
                finally:
                    conn.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": _PG_LOCK_KEY})
                    conn.commit()
        finally:
            engine.dispose()
        return
    yield


def current_revision(url: str) -> str | None:
    from alembic.runtime.migration import MigrationContext

    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()
    finally:
        engine.dispose()
