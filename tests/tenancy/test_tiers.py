"""A tenant's tier: the platform operator sets it (API and CLI), nobody else; every
process's tier cache drops the tenant's entry as the change arrives through Redis."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from click.testing import CliRunner
from starlette.testclient import TestClient

from modelport.api import create_app
from modelport.app import Services, build_services
from modelport.cli import modelport
from modelport.config import Settings
from modelport.tenancy.types import Tier
from tests.conftest import ADMIN_KEY, LiveServer
from tests.polling import eventually
from tests.tenancy.conftest import ADMIN, World, seed


def test_only_the_operator_sets_a_tier_through_the_cli(world: World, services: Services) -> None:
    assert world.client.get("/api/tenants/acme", headers=ADMIN).json()["tier"] == "standard"
    server = LiveServer(services).start()
    try:
        runner = CliRunner()
        base = ["--url", server.url, "--api-key", ADMIN_KEY]
        human = runner.invoke(modelport, [*base, "tenants", "tier", "acme", "premium"])
        assert human.exit_code == 0, human.output
        assert "tier: premium" in human.output
        moved = runner.invoke(modelport, [*base, "--json", "tenants", "tier", "acme", "free"])
        assert moved.exit_code == 0, moved.output
        assert json.loads(moved.stdout)["tier"] == "free"
        owner = ["--url", server.url, "--api-key", world.keys["acme", "owner"]]
        refused = runner.invoke(modelport, [*owner, "tenants", "tier", "acme", "premium"])
        assert refused.exit_code != 0
        unknown = runner.invoke(modelport, [*base, "tenants", "tier", "acme", "gold"])
        assert unknown.exit_code != 0
    finally:
        server.stop()
    assert world.client.get("/api/tenants/acme", headers=ADMIN).json()["tier"] == "free"


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_a_tier_change_reaches_another_process_through_redis(
    tmp_path: Path, database_url: str, redis_url: str
) -> None:
    """Two processes on the same PostgreSQL and Redis: the one that did not change the
    tier reads it afresh as soon as the event arrives (its cache would keep it an hour)."""
    shared = {"database_url": database_url, "redis_url": redis_url, "blob_url": str(tmp_path)}
    here = build_services(Settings(home=tmp_path / "here", admin_key=ADMIN_KEY, **shared))  # type: ignore[arg-type]
    there = build_services(
        Settings(
            home=tmp_path / "there",
            admin_key=ADMIN_KEY,
            resolve_cache_ttl_seconds=3600,
            **shared,  # type: ignore[arg-type]
        )
    )
    try:
        with TestClient(create_app(here)) as client:
            seed(client, here)
        degradation = there.inference.degradation
        assert degradation is not None and degradation.tier_source is not None
        tiers = degradation.tier_source

        def tier() -> Tier:
            return anyio.run(tiers.tier_of, "acme")

        assert there.changes.wait_live(60)  # type: ignore[attr-defined]
        assert tier() is Tier.STANDARD  # now cached there
        here.tenancy.set_tier("acme", Tier.FREE)
        assert eventually(lambda: tier() is Tier.FREE, seconds=60)
    finally:
        here.close()
        there.close()
