"""A tenant made before a migration, read after it: what the tenancy migrations' tests
share (``tests.migrations.upgrade_across`` with a tenant row)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.migrations import upgrade_across

OLD_TENANT = (
    "INSERT INTO tenants (slug, name, require_separation, created_at, created_by)"
    " VALUES ('old', '', 0, '2026-01-01 00:00:00', 'seed')"
)


def old_tenant_after_upgrade(
    tmp_path: Path, before: str, columns: str
) -> tuple[list[Any], tuple[Any, ...]]:
    """Upgrade a fresh SQLite database to ``before``, add the tenant ``old``, upgrade to
    the head: the differences left between the ``tenants`` table and ``store.tables``,
    and the ``columns`` (SQL) of ``old``."""
    found = upgrade_across(
        tmp_path,
        before,
        [OLD_TENANT],
        f"SELECT {columns} FROM tenants WHERE slug = 'old'",
        tables=["tenants"],
    )
    [row] = found.rows
    return found.diff, row
