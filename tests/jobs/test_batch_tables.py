"""The batches migration makes the tables ``store.tables`` declares for batches."""

from __future__ import annotations

from pathlib import Path

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine

from modelport.store import upgrade
from modelport.store.base import Base


def test_the_migration_makes_the_declared_tables(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    upgrade(url)
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            diff = compare_metadata(MigrationContext.configure(connection), Base.metadata)
    finally:
        engine.dispose()
    assert [d for d in diff if "batch" in repr(d)] == []
