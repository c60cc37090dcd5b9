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
from click.testing import CliRunner
from sqlalchemy import create_engine, inspect
from sqlalchemy.engine import make_url

from modelport.cli import modelport
from tests.conftest import PG_ENV, skip_or_fail


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
