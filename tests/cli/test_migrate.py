"""`modelport migrate` brings an empty database to the latest schema, idempotently."""

from __future__ import annotations

import os
import secrets
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


def test_migrate_postgresql(tmp_path: Path) -> None:
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
        url = parsed.set(database=name).render_as_string(hide_password=False)
        assert _migrate(url, tmp_path)
        assert {"models", "model_versions", "blobs", "uploads"} <= _tables(url)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.mark.parametrize("flag", ["--help"])
def test_cli_help_lists_commands(flag: str) -> None:
    result = CliRunner().invoke(modelport, [flag])
    assert result.exit_code == 0
    assert "serve" in result.output and "migrate" in result.output
