"""``modelport tenants update --no-cache/--cache --shared-cache/--no-shared-cache`` against
a live server over real HTTP: the flags change, and so do the tenant's cached flags
(the change event reaches the response cache)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner, Result

from modelport.app import Services
from modelport.cli import modelport
from modelport.config import Settings
from tests.conftest import ADMIN_KEY, LiveServer


@pytest.fixture
def settings(tmp_path: Path, database_url: str) -> Settings:
    """Tenants' flags cached for an hour: only the change event refreshes them here."""
    return Settings(
        home=tmp_path / "home",
        database_url=database_url,
        admin_key=ADMIN_KEY,
        auto_migrate=database_url.startswith("sqlite"),
        resolve_cache_ttl_seconds=3600,
    )


def run(server: LiveServer, key: str, *args: str, as_json: bool = False) -> Result:
    base = ["--url", server.url, "--api-key", key] + (["--json"] if as_json else [])
    return CliRunner().invoke(modelport, [*base, *args], catch_exceptions=False)


def run_json(server: LiveServer, *args: str) -> Any:
    result = run(server, ADMIN_KEY, *args, as_json=True)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_the_cli_sets_and_clears_a_tenants_cache_flags(
    live_server: LiveServer, services: Services
) -> None:
    created = run_json(live_server, "tenants", "create", "acme")
    assert (created["no_cache"], created["shared_cache"]) == (False, False)
    cache = services.inference.cache
    assert cache is not None
    assert anyio.run(cache.flags.of, "acme").no_cache is False  # now cached

    updated = run_json(live_server, "tenants", "update", "acme", "--no-cache", "--shared-cache")
    assert (updated["no_cache"], updated["shared_cache"]) == (True, True)
    flags = anyio.run(cache.flags.of, "acme")
    assert (flags.no_cache, flags.shared_cache) == (True, True)

    human = run(live_server, ADMIN_KEY, "tenants", "update", "acme", "--cache")
    assert human.exit_code == 0, human.output
    assert "no_cache: false" in human.stdout and "shared_cache: true" in human.stdout
    unshared = run_json(live_server, "tenants", "update", "acme", "--no-shared-cache")
    assert (unshared["no_cache"], unshared["shared_cache"]) == (False, False)
    assert anyio.run(cache.flags.of, "acme").shared_cache is False

    # Naming neither flag leaves both as they are.
    renamed = run_json(live_server, "tenants", "update", "acme", "--name", "Acme")
    assert (renamed["name"], renamed["no_cache"], renamed["shared_cache"]) == (
        "Acme",
        False,
        False,
    )


def test_a_tenant_that_does_not_exist_is_reported(live_server: LiveServer) -> None:
    result = run(live_server, ADMIN_KEY, "tenants", "update", "nobody", "--no-cache")
    assert result.exit_code != 0
    assert "tenant_not_found" in result.output or "not found" in result.output
