"""Suspending a tenant: the platform admin suspends with a reason; from the next request
the tenant's keys are refused with 403 ``tenant_suspended`` on every surface (cached
credentials included, in this process and in another one sharing Redis), other tenants
and the tenant's published models are untouched, and reactivating gives everything back.
Its jobs: ``tests/jobs/test_suspended_tenant.py``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from starlette.testclient import TestClient

from modelport.api import create_app
from modelport.app import Services, build_services
from modelport.cli import modelport
from modelport.config import Settings
from modelport.errors import Forbidden
from tests.conftest import ADMIN_KEY, LiveServer
from tests.polling import eventually
from tests.tenancy.conftest import ADMIN, World, seed
from tests.tenancy.migrations import old_tenant_after_upgrade

BODY = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1, 2, 3, 4]}]}


def _suspend(world: World, tenant: str, reason: str = "unpaid invoice") -> dict[str, object]:
    response = world.client.post(
        f"/api/tenants/{tenant}/suspend", json={"reason": reason}, headers=ADMIN
    )
    assert response.status_code == 200, response.text
    body: dict[str, object] = response.json()
    return body


def _infer(world: World, model: str, tenant: str, role: str = "consumer") -> tuple[int, str]:
    response = world.client.post(
        f"/v2/models/{model}/infer", json=BODY, headers=world.key(tenant, role)
    )
    return response.status_code, response.json().get("code", "")


def test_a_suspended_tenants_keys_are_refused_until_it_is_reactivated(world: World) -> None:
    # The keys authenticate once first: their credentials are in the cache.
    assert world.client.get("/api/keys", headers=world.key("acme", "owner")).status_code == 200
    assert _infer(world, "acme/public", "acme")[0] == 200

    suspended = _suspend(world, "acme")
    assert suspended["suspension_reason"] == "unpaid invoice"
    assert suspended["suspended_at"] is not None

    for role in ("owner", "consumer", "ci"):
        refused = world.client.get("/api/keys", headers=world.key("acme", role))
        assert refused.status_code == 403
        assert refused.json()["code"] == "tenant_suspended"
        assert "suspended" in refused.json()["detail"]
    assert _infer(world, "acme/public", "acme") == (403, "tenant_suspended")
    models = world.client.get("/v1/models", headers=world.key("acme", "consumer"))
    assert models.status_code == 403 and models.json()["error"]["code"] == "tenant_suspended"

    # Another tenant is untouched, and still calls the suspended tenant's public model.
    assert world.client.get("/api/keys", headers=world.key("globex", "owner")).status_code == 200
    assert _infer(world, "acme/public", "globex")[0] == 200

    # Suspending again keeps when it began and takes the new reason.
    again = _suspend(world, "acme", "fraud review")
    assert again["suspended_at"] == suspended["suspended_at"]
    assert again["suspension_reason"] == "fraud review"

    listed = world.client.get("/api/tenants", headers=ADMIN).json()["items"]
    assert {t["slug"]: t["suspended_at"] is not None for t in listed} == {
        "acme": True,
        "globex": False,
    }

    lifted = world.client.post("/api/tenants/acme/reactivate", headers=ADMIN)
    assert lifted.status_code == 200
    assert (lifted.json()["suspended_at"], lifted.json()["suspension_reason"]) == (None, "")
    assert world.client.get("/api/keys", headers=world.key("acme", "owner")).status_code == 200
    assert _infer(world, "acme/public", "acme")[0] == 200


def test_only_the_platform_admin_suspends_and_a_reason_is_required(world: World) -> None:
    owner = world.key("acme", "owner")
    own = world.client.post("/api/tenants/acme/suspend", json={"reason": "x"}, headers=owner)
    assert own.status_code == 403
    other = world.client.post("/api/tenants/globex/reactivate", headers=world.key("acme", "owner"))
    assert other.status_code == 403
    blank = world.client.post("/api/tenants/acme/suspend", json={"reason": "  "}, headers=ADMIN)
    assert (blank.status_code, blank.json()["code"]) == (400, "reason_required")
    long = world.client.post("/api/tenants/acme/suspend", json={"reason": "x" * 300}, headers=ADMIN)
    assert long.status_code == 400
    missing = world.client.post("/api/tenants/nobody/suspend", json={"reason": "x"}, headers=ADMIN)
    assert (missing.status_code, missing.json()["code"]) == (404, "tenant_not_found")
    # Nothing of that was applied.
    assert world.client.get("/api/tenants/acme", headers=ADMIN).json()["suspended_at"] is None
    assert world.client.get("/api/keys", headers=owner).status_code == 200


def test_a_suspension_is_in_the_audit_log_with_its_reason(world: World) -> None:
    _suspend(world, "acme", "chargeback")
    world.client.post("/api/tenants/acme/reactivate", headers=ADMIN)
    world.client.get("/api/keys", headers=world.key("acme", "owner"))
    events = world.client.get("/api/audit", params={"tenant": "acme"}, headers=ADMIN).json()
    actions = [(e["action"], e.get("reason")) for e in events["items"]]
    assert ("tenants.suspend_tenant", "chargeback") in actions
    assert any(action == "tenants.reactivate_tenant" for action, _ in actions)


def test_a_key_made_while_suspended_does_not_work_either(world: World) -> None:
    _suspend(world, "acme")
    issued = world.services.tenancy.create_key("acme", "owner", name="late", actor="admin")
    response = world.client.get("/api/keys", headers={"Authorization": f"Bearer {issued.secret}"})
    assert (response.status_code, response.json()["code"]) == (403, "tenant_suspended")


def test_the_cli_suspends_and_reactivates(world: World, services: Services) -> None:
    server = LiveServer(services).start()
    try:
        base = ["--url", server.url, "--api-key", ADMIN_KEY]
        runner = CliRunner()
        human = runner.invoke(
            modelport, [*base, "tenants", "suspend", "acme", "--reason", "abuse report"]
        )
        assert human.exit_code == 0, human.output
        assert "suspended" in human.output and "abuse report" in human.output
        lifted = runner.invoke(modelport, [*base, "--json", "tenants", "reactivate", "acme"])
        assert lifted.exit_code == 0, lifted.output
        assert json.loads(lifted.stdout)["suspended_at"] is None
        globex_owner = ["--url", server.url, "--api-key", world.keys["globex", "owner"]]
        refused = runner.invoke(
            modelport, [*globex_owner, "tenants", "suspend", "acme", "--reason", "x"]
        )
        assert refused.exit_code != 0
    finally:
        server.stop()
    assert world.client.get("/api/tenants/acme", headers=ADMIN).json()["suspended_at"] is None


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_a_suspension_reaches_another_process_through_redis(
    tmp_path: Path, database_url: str, redis_url: str
) -> None:
    """Two installations' processes on the same PostgreSQL and Redis: the one that did
    not suspend drops its cached credential as soon as the event arrives (its key cache
    would keep it for minutes otherwise)."""
    shared = {"database_url": database_url, "redis_url": redis_url, "blob_url": str(tmp_path)}
    here = build_services(Settings(home=tmp_path / "here", admin_key=ADMIN_KEY, **shared))  # type: ignore[arg-type]
    there = build_services(
        Settings(home=tmp_path / "there", admin_key=ADMIN_KEY, key_cache_ttl_seconds=3600, **shared)  # type: ignore[arg-type]
    )
    try:
        with TestClient(create_app(here)) as client:
            world = seed(client, here)
        key = world.keys["acme", "owner"]
        assert there.authenticator.invalidation.wait_subscribed(60)  # type: ignore[attr-defined]
        assert there.authenticator.authenticate(key).tenant == "acme"  # now cached there
        assert len(there.authenticator.cache) >= 1

        here.tenancy.suspend_tenant("acme", reason="unpaid")

        def refused() -> bool:
            try:
                there.authenticator.authenticate(key)
            except Forbidden as exc:
                return exc.code == "tenant_suspended"
            return False

        assert eventually(refused, seconds=60)
        here.tenancy.reactivate_tenant("acme")
        assert eventually(lambda: not refused(), seconds=60)
    finally:
        here.close()
        there.close()


def test_the_migration_adds_the_declared_columns_with_existing_tenants_active(
    tmp_path: Path,
) -> None:
    diff, row = old_tenant_after_upgrade(
        tmp_path, "0021_console_sessions", "suspended_at, suspension_reason"
    )
    assert diff == []
    assert row == (None, "")
