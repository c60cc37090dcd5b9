"""Databases for tests: SQLite databases at the head revision copied from one migrated
per test process (a migration from nothing costs about half a second a test), and a
PostgreSQL database emptied, or put back to a snapshot of its rows, between tests."""

from __future__ import annotations

import atexit
import shutil
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

import psycopg
from sqlalchemy.engine import make_url

from modelport.store import upgrade
from modelport.store.base import Base

_lock = threading.Lock()
_template: list[Path] = []


def migrated_template() -> Path:
    """This process's migrated SQLite database (made on first use, removed at exit)."""
    with _lock:
        if not _template:
            folder = Path(tempfile.mkdtemp(prefix="modelport-sqlite-template-"))
            atexit.register(shutil.rmtree, folder, True)
            path = folder / "template.db"
            upgrade(f"sqlite:///{path}")
            _template.append(path)
        return _template[0]


def migrated_sqlite(path: Path) -> str:
    """The URL of a SQLite database at ``path`` at the head revision: a copy of the
    template unless a database is there already (a later process's services on the same
    home share it)."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(migrated_template(), path)
    return f"sqlite:///{path}"


def _dsn(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


UNDECLARED_TABLES = ("model_search",)
"""PostgreSQL tables a migration makes that ``store.tables`` does not declare (the
catalog's search index: its column type exists on PostgreSQL only)."""


def _tables() -> list[str]:
    """The schema's tables but the installation's id, which its migration made once."""
    declared = [t.name for t in Base.metadata.sorted_tables if t.name != "installation"]
    return declared + list(UNDECLARED_TABLES)


_SEQUENCES = (
    "SELECT format('%I.%I', schemaname, sequencename), last_value FROM pg_sequences"
    " WHERE schemaname = current_schema()"
)


def truncate_tables(url: str) -> None:
    """Empty every table of the PostgreSQL database at ``url`` but the installation's
    id, and start every sequence again.

    Rows are deleted rather than truncated: ``TRUNCATE`` gives each of the hundred-odd
    tables and indexes a new file, which took about a second a test, where deleting the
    few rows a test left takes milliseconds. Foreign keys are not checked meanwhile
    (every row goes), so the order of the tables does not matter."""
    with psycopg.connect(_dsn(url)) as conn:
        _empty(conn)


def _empty(conn: psycopg.Connection) -> None:
    conn.execute("SET LOCAL session_replication_role = replica")
    for name in _tables():
        conn.execute(f'DELETE FROM "{name}"')
    for sequence, _ in conn.execute(_SEQUENCES).fetchall():
        conn.execute(f"ALTER SEQUENCE {sequence} RESTART")


@dataclass(frozen=True)
class RowSnapshot:
    """Every row of a PostgreSQL database's tables (as ``COPY`` writes them) and where
    its sequences stood: taken once after seeding, put back before each test that wants
    the seeded state, in milliseconds where seeding again takes a second."""

    rows: dict[str, bytes]
    sequences: dict[str, int | None]

    @classmethod
    def take(cls, url: str) -> RowSnapshot:
        rows: dict[str, bytes] = {}
        with psycopg.connect(_dsn(url)) as conn, conn.cursor() as cursor:
            for name in _tables():
                with cursor.copy(f'COPY "{name}" TO STDOUT') as copy:
                    data = b"".join(bytes(chunk) for chunk in copy)
                if data:
                    rows[name] = data
            sequences = dict(conn.execute(_SEQUENCES).fetchall())
        return cls(rows, sequences)

    def restore(self, url: str) -> None:
        """Empty the database at ``url`` and put the rows and sequences back."""
        with psycopg.connect(_dsn(url)) as conn, conn.cursor() as cursor:
            _empty(conn)  # foreign keys stay unchecked for the copies too
            for name, data in self.rows.items():
                with cursor.copy(f'COPY "{name}" FROM STDIN') as copy:
                    copy.write(data)
            for sequence, last in self.sequences.items():
                if last is not None:
                    conn.execute("SELECT setval(%s, %s)", (sequence, last))
