"""Migration 0024 makes ``datasets``, ``dataset_versions`` and ``evaluations`` as
``store.tables`` declares them (on SQLite and PostgreSQL), and its downgrade removes
them again."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, inspect

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
