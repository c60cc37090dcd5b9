"""Migration 0020 adds the tenants' cache flags as ``store.tables`` declares them, and a
tenant made before it reads as neither no-cache nor shared."""

from __future__ import annotations

from pathlib import Path

from tests.tenancy.migrations import old_tenant_after_upgrade


def test_the_migration_adds_the_declared_columns_false_for_existing_tenants(
    tmp_path: Path,
) -> None:
    diff, row = old_tenant_after_upgrade(tmp_path, "0019_jobquota_limits", "no_cache, shared_cache")
    assert diff == []
    assert (bool(row[0]), bool(row[1])) == (False, False)
