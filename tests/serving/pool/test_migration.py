"""Migration 0027 makes ``worker_placements`` as ``store.tables`` declares it (on SQLite
and PostgreSQL), and its downgrade removes it again."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, inspect

from modelport.store import upgrade
from modelport.store.base import Base
from modelport.store.migrate import alembic_config

BEFORE = "0026_catalog_search_fts"
TABLE = "worker_placements"


def test_the_migration_makes_the_declared_table_and_downgrades(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    upgrade(url, BEFORE)
    engine = create_engine(url)
    try:
        assert TABLE not in inspect(engine).get_table_names()
        upgrade(url)
        with engine.connect() as connection:
            diff = compare_metadata(MigrationContext.configure(connection), Base.metadata)
        assert [d for d in diff if TABLE in repr(d)] == []
        command.downgrade(alembic_config(url), BEFORE)
        engine.dispose()
        assert TABLE not in inspect(engine).get_table_names()
    finally:
        engine.dispose()


def test_the_postgresql_schema_matches_the_declared_table(database_url: str) -> None:
    engine = create_engine(database_url)
    try:
        with engine.connect() as connection:
            diff = compare_metadata(MigrationContext.configure(connection), Base.metadata)
        assert [d for d in diff if TABLE in repr(d)] == []
    finally:
        engine.dispose()
