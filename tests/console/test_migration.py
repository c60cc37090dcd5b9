"""Migration 0021 makes ``console_sessions`` as ``store.tables`` declares it, and its
downgrade removes it again."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, inspect

from modelport.store import upgrade
from modelport.store.base import Base
from modelport.store.migrate import alembic_config


def test_the_migration_makes_the_declared_table_and_downgrades(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    upgrade(url, "0020_respcache_tenant_cache")
    engine = create_engine(url)
    try:
        assert "console_sessions" not in inspect(engine).get_table_names()
        upgrade(url)
        with engine.connect() as connection:
            diff = compare_metadata(MigrationContext.configure(connection), Base.metadata)
        assert [d for d in diff if "console_sessions" in repr(d)] == []
        command.downgrade(alembic_config(url), "0020_respcache_tenant_cache")
        engine.dispose()
        assert "console_sessions" not in inspect(engine).get_table_names()
    finally:
        engine.dispose()
