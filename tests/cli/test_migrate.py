"""`modelport migrate` brings an empty database to the latest schema, idempotently."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import psycopg
import pytest
from alembic.script import ScriptDirectory
from click.testing import CliRunner
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.engine import make_url

from modelport.cli import modelport
from modelport.store.migrate import alembic_config, current_revision, upgrade
from tests.conftest import PG_ENV, skip_or_fail

pytestmark = pytest.mark.heavy  # minutes of work: started first in a parallel run


def _migrate(url: str, tmp_path: Path) -> str:
    env = {"MODELPORT_DATABASE_URL": url, "MODELPORT_HOME": str(tmp_path)}
    for _ in range(2):  # a second run is a no-op
        result = CliRunner().invoke(modelport, ["--json", "migrate"], env=env)
        assert result.exit_code == 0, result.output
    return str(orjson.loads(result.output)["revision"])


def _tables(url: str) -> set[str]:
    engine = create_engine(url)
    try:
        return set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


def test_migrate_sqlite(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    assert _migrate(url, tmp_path)
    assert {"models", "model_versions", "blobs", "uploads", "alembic_version"} <= _tables(url)


def _migrate_concurrently(url: str, processes: int = 4) -> None:
    """Start several processes migrating the same empty database at once, as worker
    processes or gateways starting together do; every one must succeed."""
    code = "import sys; from modelport.store import upgrade; upgrade(sys.argv[1])"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, url], stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        for _ in range(processes)
    ]
    outputs = [proc.communicate(timeout=120)[0].decode() for proc in procs]
    for proc, output in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, output


@pytest.mark.slow
def test_concurrent_migrations_of_one_sqlite_database_all_succeed(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    _migrate_concurrently(url)
    assert {"models", "model_versions", "usage_events", "alembic_version"} <= _tables(url)


@pytest.fixture
def fresh_postgres_url() -> Iterator[str]:
    """A new, empty PostgreSQL database, dropped afterwards."""
    base = os.environ.get(PG_ENV)
    if not base:
        skip_or_fail(f"PostgreSQL tests need {PG_ENV}")
    assert base
    parsed = make_url(base)
    name = f"mp_migrate_{secrets.token_hex(4)}"
    admin = parsed.set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield parsed.set(database=name).render_as_string(hide_password=False)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_migrate_postgresql(tmp_path: Path, fresh_postgres_url: str) -> None:
    assert _migrate(fresh_postgres_url, tmp_path)
    assert {"models", "model_versions", "blobs", "uploads"} <= _tables(fresh_postgres_url)


@pytest.mark.slow
def test_concurrent_migrations_of_one_postgresql_database_all_succeed(
    fresh_postgres_url: str,
) -> None:
    _migrate_concurrently(fresh_postgres_url)
    assert {"models", "model_versions", "usage_events"} <= _tables(fresh_postgres_url)


@pytest.mark.parametrize("flag", ["--help"])
def test_cli_help_lists_commands(flag: str) -> None:
    result = CliRunner().invoke(modelport, [flag])
    assert result.exit_code == 0
    assert "serve" in result.output and "migrate" in result.output


# --- Stopped part-way: a migrator killed at any point leaves a database the next start
# can bring to the latest schema, with every row it held.

_REPO = Path(__file__).resolve().parents[2]
_SIGNALS = ("KILL", "TERM", "INT")  # killed, stopped (SIGTERM), Ctrl-C


def _migrate_stopping_at(url: str, home: Path, stop: int, signame: str) -> tuple[int, str]:
    """Run ``modelport migrate`` in a process that signals itself at point ``stop``
    (see tests/migrate_process.py); its exit status and stderr."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MODELPORT_")}
    env |= {"MODELPORT_DATABASE_URL": url, "MODELPORT_HOME": str(home)}
    proc = subprocess.run(
        [sys.executable, "-m", "tests.migrate_process", str(stop), signame],
        cwd=_REPO,
        env=env,
        capture_output=True,
        timeout=120,
    )
    return proc.returncode, proc.stderr.decode()


def _points(url: str, home: Path) -> int:
    """How many statements and commits a migration to the latest schema takes from
    the state ``url`` is in (which it then is no longer in)."""
    returncode, stderr = _migrate_stopping_at(url, home, 0, "KILL")
    assert returncode == 0, stderr
    return int(stderr.rsplit("points=", 1)[1])


def _schema(url: str) -> dict[str, object]:
    engine = create_engine(url)
    try:
        inspector = inspect(engine)
        return {
            table: (
                sorted(c["name"] for c in inspector.get_columns(table)),
                sorted(i["name"] or "" for i in inspector.get_indexes(table)),
            )
            for table in inspector.get_table_names()
        }
    finally:
        engine.dispose()


def _sample(total: int, count: int) -> list[int]:
    """``count`` points spread over 1..total, the first and last always among them."""
    step = max(1, (total - 1) / max(1, count - 1))
    return sorted({min(total, 1 + round(i * step)) for i in range(count)})


def _stop_then_start(url: str, home: Path, stop: int, signame: str) -> None:
    returncode, stderr = _migrate_stopping_at(url, home, stop, signame)
    # Stopped by the signal (Ctrl-C: KeyboardInterrupt, exit status 1), never finished.
    assert returncode != 0, f"not stopped at point {stop}: {stderr}"
    upgrade(url)  # the next start


@pytest.mark.slow
def test_a_first_migration_stopped_anywhere_lets_the_next_start_finish(tmp_path: Path) -> None:
    reference = f"sqlite:///{tmp_path / 'reference.db'}"
    total = _points(reference, tmp_path)
    expected = _schema(reference)
    for n, stop in enumerate(_sample(total, 14)):
        url = f"sqlite:///{tmp_path / f'fresh-{stop}.db'}"
        _stop_then_start(url, tmp_path, stop, _SIGNALS[n % 3])
        assert _schema(url) == expected, f"stopped at {stop}"
        assert current_revision(url) == current_revision(reference)


_HEAD = ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()
_OLD = "0003_limits"  # budgets gets rebuilt by the next migration on SQLite


def _old_database_with_data(url: str) -> None:
    upgrade(url, _OLD)
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO tenants (slug, name, require_separation, created_at, created_by)"
                    " VALUES ('acme', 'Acme', false, '2026-01-01 00:00:00', 'admin')"
                )
            )
            conn.execute(
                text(
                    "INSERT INTO budgets (tenant, hard_cap_micros, soft_cap_micros, spent_micros,"
                    " period, updated_at) VALUES ('acme', 5000000, NULL, 1234567, '2026-01',"
                    " '2026-01-01 00:00:00')"
                )
            )
    finally:
        engine.dispose()


def _assert_data_intact(url: str, *, reserved: bool = True) -> None:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            assert conn.execute(text("SELECT slug, name FROM tenants")).all() == [("acme", "Acme")]
            columns = "tenant, hard_cap_micros, soft_cap_micros, spent_micros, period"
            if reserved:  # added by the migration after the old revision
                columns += ", reserved_micros"
            budgets = conn.execute(text(f"SELECT {columns} FROM budgets")).all()
            assert budgets == [("acme", 5000000, None, 1234567, "2026-01", 0)[: 5 + reserved]]
    finally:
        engine.dispose()


@pytest.mark.slow
def test_an_upgrade_stopped_anywhere_lets_the_next_start_finish_with_data_intact(
    tmp_path: Path,
) -> None:
    reference = f"sqlite:///{tmp_path / 'reference.db'}"
    _old_database_with_data(reference)
    total = _points(reference, tmp_path)
    expected = _schema(reference)
    _assert_data_intact(reference)
    for n, stop in enumerate(_sample(total, 10)):
        url = f"sqlite:///{tmp_path / f'old-{stop}.db'}"
        _old_database_with_data(url)
        _stop_then_start(url, tmp_path, stop, _SIGNALS[n % 3])
        assert _schema(url) == expected, f"stopped at {stop}"
        _assert_data_intact(url)


@pytest.mark.slow
def test_a_postgresql_migration_killed_part_way_lets_the_next_start_finish(
    tmp_path: Path, fresh_postgres_url: str
) -> None:
    url = fresh_postgres_url
    _old_database_with_data(url)
    # Killed in the middle of a migration, then the next start stopped in a later one.
    for stop, signame in ((25, "KILL"), (25, "TERM")):
        returncode, stderr = _migrate_stopping_at(url, tmp_path, stop, signame)
        assert returncode != 0, f"not stopped at point {stop}: {stderr}"
        assert current_revision(url) not in (None, _HEAD)
        _assert_data_intact(url, reserved=current_revision(url) != _OLD)
    upgrade(url)
    assert current_revision(url) == _HEAD
    _assert_data_intact(url)
