"""Migration 0020 adds the tenants' cache flags as ``store.tables`` declares them, and a
tenant made before it reads as neither no-cache nor shared."""

from __future__ import annotations

from pathlib import Path

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, text

from modelport.store import upgrade
from modelport.store.base import Base


def test_the_migration_adds_the_declared_columns_false_for_existing_tenants(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    upgrade(url, "0019_jobquota_limits")
    engine = create_engine(url)
    try:
        with engine.begin() as connection:
            connection.execute(
                text(
                    "INSERT INTO tenants (slug, name, require_separation, created_at, created_by)"
                    " VALUES ('old', '', 0, '2026-01-01 00:00:00', 'seed')"
                )
            )
        upgrade(url)
        with engine.connect() as connection:
            diff = compare_metadata(MigrationContext.configure(connection), Base.metadata)
            row = connection.execute(
                text("SELECT no_cache, shared_cache FROM tenants WHERE slug = 'old'")
            ).one()
    finally:
        engine.dispose()
    assert [d for d in diff if "tenants" in repr(d)] == []
    assert (bool(row[0]), bool(row[1])) == (False, False)
