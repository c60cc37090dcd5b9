"""A tenant made before a migration, read after it: what the tenancy migrations' tests
share."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, text

from modelport.store import upgrade
from modelport.store.base import Base


def old_tenant_after_upgrade(
    tmp_path: Path, before: str, columns: str
) -> tuple[list[Any], tuple[Any, ...]]:
    """Upgrade a fresh SQLite database to ``before``, add the tenant ``old``, upgrade to
    the head: the differences left between the ``tenants`` table and ``store.tables``,
    and the ``columns`` (SQL) of ``old``."""
    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    upgrade(url, before)
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
                text(f"SELECT {columns} FROM tenants WHERE slug = 'old'")
            ).one()
    finally:
        engine.dispose()
    return [d for d in diff if "tenants" in repr(d)], tuple(row)
