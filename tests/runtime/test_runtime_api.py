"""GET /api/runtime/models: the platform admin sees the versions this process hosts, with
their state, queue and crash quarantine; nobody else does."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from modelport.clock import ManualClock
from modelport.runtime.process.crashes import CrashLedger
from modelport.runtime.types import VersionKey
from tests.metering.conftest import Platform, make_platform
from tests.runtime.conftest import DictBlobSource, HostFactory, add_one_manifest


@pytest.fixture
def platform(tmp_path: Path, database_url: str) -> Iterator[Platform]:
    built = make_platform(tmp_path / "home", database_url)
    try:
        yield built
    finally:
        built.close_client()
        built.services.close()


def test_the_admin_sees_a_version_loaded_by_a_call(platform: Platform) -> None:
    before = platform.client.get("/api/runtime/models")
    assert before.status_code == 200
    assert before.json() == {"hosts_models": True, "items": [], "generative": []}
    assert platform.infer().status_code == 200
    [row] = platform.client.get("/api/runtime/models").json()["items"]
    assert (row["model"], row["version"], row["state"]) == ("acme/adder", "1", "ready")
    assert row["manifest_digest"].startswith("sha256:")
    assert row["queued"] == 0 and row["in_flight"] == 0 and row["max_queue_size"] > 0
    assert row["crashes"] == 0 and row["quarantined_seconds"] == 0.0
    assert row["cause"] is None


def test_a_tenant_key_is_refused(platform: Platform) -> None:
    tenancy = platform.services.tenancy
    tenancy.add_member("acme", "olga", roles=["owner"], actor="admin")
    owner = tenancy.create_key("acme", "olga", name="k", actor="admin").secret
    assert platform.infer().status_code == 200
    for key in (platform.key, owner):  # a consumer, and even the model's tenant's owner
        response = platform.client.get(
            "/api/runtime/models", headers={"Authorization": f"Bearer {key}"}
        )
        assert response.status_code == 403, response.text
        assert response.json()["code"] == "forbidden"
        assert "acme/adder" not in response.text


def test_a_status_reports_crashes_and_quarantine_from_the_ledger(
    make_host: HostFactory, source: DictBlobSource
) -> None:
    clock = ManualClock()
    ledger = CrashLedger(limit=2, window=60.0, clock=clock)
    host = make_host(crash_ledger=ledger)
    manifest, digest = add_one_manifest(source)
    key = VersionKey("acme/add", "1", digest)
    host.load(key, manifest, source)
    ledger.record(key.ref)
    status = host.status(key)
    assert status is not None
    assert (status.crashes, status.quarantined_seconds) == (1, 0.0)
    ledger.record(key.ref)
    status = host.status(key)
    assert status is not None
    assert status.crashes == 2 and status.quarantined_seconds == pytest.approx(60.0)
    clock.advance(61)
    status = host.status(key)
    assert status is not None
    assert (status.crashes, status.quarantined_seconds) == (0, 0.0)
