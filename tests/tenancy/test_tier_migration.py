"""Migration 0034 adds the tenants' tier and the endpoints' degradation policy as
``store.tables`` declares them: a tenant made before it is ``standard``, an endpoint has
no policy of its own (the installation's)."""

from __future__ import annotations

from pathlib import Path

from tests.migrations import upgrade_across
from tests.tenancy.migrations import OLD_TENANT, old_tenant_after_upgrade

OLD_ENDPOINT = (
    "INSERT INTO endpoints (name, tenant, description, deadline_ms, priority, revision,"
    " created_at, created_by) VALUES ('old', 'old', '', 1000, 'interactive', 0,"
    " '2026-01-01 00:00:00', 'seed')"
)


def test_an_older_tenant_is_standard(tmp_path: Path) -> None:
    diff, row = old_tenant_after_upgrade(tmp_path, "0033_erasure_gpu_time", "tier")
    assert diff == []
    assert row == ("standard",)


def test_an_older_endpoint_has_the_installations_policy(tmp_path: Path) -> None:
    found = upgrade_across(
        tmp_path,
        "0033_erasure_gpu_time",
        [OLD_TENANT, OLD_ENDPOINT],
        "SELECT degradation FROM endpoints WHERE name = 'old'",
        tables=["endpoints"],
    )
    assert found.diff == []
    assert found.rows == [(None,)]
