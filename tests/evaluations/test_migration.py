"""Migration 0024 makes ``datasets``, ``dataset_versions`` and ``evaluations`` as
``store.tables`` declares them (on SQLite and PostgreSQL), and its downgrade removes
them again; 0032 adds endpoint evaluations and the score column, backfilled from the
verified results."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, inspect, text

from modelport.store import upgrade
from modelport.store.base import Base
from modelport.store.migrate import alembic_config

BEFORE = "0023_job_lease_generation"
TABLES = ("datasets", "dataset_versions", "evaluations")


def test_the_migration_makes_the_declared_tables_and_downgrades(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    upgrade(url, BEFORE)
    engine = create_engine(url)
    try:
        assert not set(TABLES) & set(inspect(engine).get_table_names())
        upgrade(url)
        with engine.connect() as connection:
            diff = compare_metadata(MigrationContext.configure(connection), Base.metadata)
        assert [d for d in diff if any(t in repr(d) for t in TABLES)] == []
        command.downgrade(alembic_config(url), BEFORE)
        engine.dispose()
        assert not set(TABLES) & set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


def test_the_postgresql_schema_matches_the_declared_tables(database_url: str) -> None:
    """The ``database_url`` fixture's database is migrated to the head (on PostgreSQL,
    from the run's template)."""
    engine = create_engine(database_url)
    try:
        with engine.connect() as connection:
            diff = compare_metadata(MigrationContext.configure(connection), Base.metadata)
        assert [d for d in diff if any(t in repr(d) for t in TABLES)] == []
    finally:
        engine.dispose()


def test_0032_backfills_the_score_of_verified_results_and_downgrades(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'scores.db'}"
    upgrade(url, "0031_prompt_templates")
    engine = create_engine(url)
    row = {
        "kind": "verified",
        "tenant": "acme",
        "created_by": "admin",
        "model_owner": "acme",
        "model_name": "iris",
        "model_version": "1",
        "version_digest": "sha256:" + "0" * 64,
        "dataset_owner": "acme",
        "dataset_name": "iris-eval",
        "dataset_version": "1",
        "dataset_digest": "sha256:" + "1" * 64,
        "split": "test",
        "output": "y",
        "published": True,
        "created_at": "2026-12-01 00:00:00",
    }
    rows = [
        {
            **row,
            "id": "a",
            "task": "classification",
            "state": "succeeded",
            "metrics": '{"accuracy": 0.8}',
        },
        {**row, "id": "b", "task": "regression", "state": "succeeded", "metrics": '{"mae": 2.5}'},
        {
            **row,
            "id": "c",
            "task": "classification",
            "state": "succeeded",
            "kind": "claimed",
            "metrics": '{"accuracy": 1.0}',
        },
        {**row, "id": "d", "task": "classification", "state": "failed", "metrics": None},
    ]
    try:
        with engine.begin() as connection:
            columns = ", ".join(rows[0])
            values = ", ".join(f":{k}" for k in rows[0])
            connection.execute(text(f"INSERT INTO evaluations ({columns}) VALUES ({values})"), rows)
        upgrade(url)
        with engine.connect() as connection:
            found = connection.execute(
                text("SELECT id, score, higher_is_better FROM evaluations ORDER BY id")
            ).all()
        assert [tuple(r) for r in found] == [
            ("a", 0.8, True),
            ("b", 2.5, False),
            ("c", None, None),
            ("d", None, None),
        ]
        command.downgrade(alembic_config(url), "0031_prompt_templates")
        engine.dispose()
        names = {c["name"] for c in inspect(engine).get_columns("evaluations")}
        assert not {"endpoint", "served", "score", "higher_is_better"} & names
    finally:
        engine.dispose()
