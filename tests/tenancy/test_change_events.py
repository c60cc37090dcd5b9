"""Changes made through the service layer, not through a route, reach the inference
path's caches at once: an alias moved, a grant given or withdrawn, a lifecycle state
changed. The resolve cache TTL is an hour, so only the change event can explain the
next call seeing the change."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from modelport.config import Settings
from tests.conftest import ADMIN_KEY
from tests.tenancy.conftest import World

HOUR = 3600.0
BODY = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1, 2, 3, 4]}]}


@pytest.fixture
def settings(tmp_path: Path, database_url: str) -> Settings:
    return Settings(
        home=tmp_path / "home",
        database_url=database_url,
        admin_key=ADMIN_KEY,
        auto_migrate=database_url.startswith("sqlite"),
        runtime_intra_op_threads=1,
        resolve_cache_ttl_seconds=HOUR,
    )


def _call(world: World, ref: str = "stable") -> httpx.Response:
    """globex's consumer calls acme's private model by ``ref`` over /v2."""
    path = f"/v2/models/acme/private/versions/{ref}/infer"
    return world.client.post(path, json=BODY, headers=world.key("globex", "consumer"))


def _code(response: httpx.Response) -> tuple[int, str | None]:
    return response.status_code, response.json().get("code")


def test_service_calls_reach_the_next_v2_call_at_once(world: World) -> None:
    registry, tenancy = world.services.registry, world.services.tenancy
    # No grant yet: acme's private model does not exist for globex (and that is cached).
    assert _call(world).status_code == 404
    grant, _ = tenancy.create_grant("acme", "globex", actor="test")
    # Granted, but ``stable`` names version 1, a candidate: not callable across tenants.
    assert _code(_call(world)) == (403, "version_not_approved")
    registry.set_alias("acme", "private", "stable", "2", actor="test")  # approved
    called = _call(world)
    assert called.status_code == 200, called.text
    assert called.json()["model_version"] == "2"
    registry.transition("acme", "private", "2", "rejected", actor="test")
    assert _code(_call(world)) == (403, "version_not_approved")
    registry.set_alias("acme", "private", "stable", "1", actor="test")
    registry.delete_alias("acme", "private", "stable", actor="test")
    assert _call(world).status_code == 404  # the alias is gone
    tenancy.delete_grant(grant.id)
    assert _call(world, "1").status_code == 404  # hidden again, not "not approved"


def test_a_new_version_is_what_the_model_resolves_to_at_once(world: World) -> None:
    world.services.registry.create_model("acme", "fresh", actor="test", license="MIT")
    world.publish("acme", "fresh", "1")
    headers = world.key("acme", "consumer")
    first = world.client.post("/v2/models/acme/fresh/infer", json=BODY, headers=headers)
    assert first.status_code == 200, first.text
    world.publish("acme", "fresh", "2")  # the newest candidate, with none approved
    again = world.client.post("/v2/models/acme/fresh/infer", json=BODY, headers=headers)
    assert again.status_code == 200, again.text
    assert (first.json()["model_version"], again.json()["model_version"]) == ("1", "2")
