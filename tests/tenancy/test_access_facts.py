"""Calls across tenants decide from cached facts: no query per call, yet a withdrawn
grant or a version taken out of service stops them at once in this process, and
within the TTL when changed elsewhere."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from modelport.clock import ManualClock
from modelport.inference.access_facts import AccessFacts
from tests.tenancy.conftest import World

INPUT = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1, 2, 3, 4]}]}


def infer(world: World, path: str, role: str = "consumer") -> httpx.Response:
    return world.client.post(
        f"/v2/models/{path}/infer", json=INPUT, headers=world.key("globex", role)
    )


def facts(world: World) -> AccessFacts:
    return world.services.inference.facts


def count_reads(world: World, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every registry and grants read the authorization path could make, by name."""
    reads: list[str] = []

    def counted(owner: Any, name: str) -> None:
        original = getattr(owner, name)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            reads.append(name)
            return original(*args, **kwargs)

        monkeypatch.setattr(owner, name, wrapper)

    registry, tenancy = world.services.registry, world.services.tenancy
    for name in ("get_model", "get_version", "resolve"):
        counted(registry, name)
    counted(tenancy, "grants_to")
    return reads


def test_repeated_calls_across_tenants_read_nothing_per_call(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert (
        world.client.post(
            "/api/grants",
            json={"grantee": "globex", "model": "private"},
            headers=world.key("acme", "owner"),
        ).status_code
        == 201
    )
    reads = count_reads(world, monkeypatch)
    for _ in range(5):
        assert infer(world, "acme/public/versions/1").status_code == 200
        assert infer(world, "acme/private/versions/2").status_code == 200
    # One read of each fact, shared by every later call within the TTL.
    assert sorted(reads) == ["get_model", "get_model", "grants_to", "resolve", "resolve"]


def test_a_grant_withdrawn_here_stops_calls_at_once(world: World) -> None:
    owner = world.key("acme", "owner")
    created = world.client.post(
        "/api/grants", json={"grantee": "globex", "model": "private"}, headers=owner
    )
    assert infer(world, "acme/private/versions/2").status_code == 200
    deleted = world.client.delete(f"/api/grants/{created.json()['id']}", headers=owner)
    assert deleted.status_code == 204
    refused = infer(world, "acme/private/versions/2")
    assert refused.status_code == 404 and "not found" in refused.json()["error"]
    # And given again: callable at once.
    world.client.post("/api/grants", json={"grantee": "globex"}, headers=owner)
    assert infer(world, "acme/private/versions/2").status_code == 200


def test_a_grant_withdrawn_elsewhere_stops_calls_within_the_ttl(
    world: World, clock: ManualClock
) -> None:
    facts(world).ttl = 0.2
    grant, _ = world.services.tenancy.create_grant("acme", "globex", actor="elsewhere")
    assert infer(world, "acme/private/versions/2").status_code == 200
    # Withdrawn behind this process's back, as another process would.
    world.services.tenancy.delete_grant(grant.id)
    clock.advance(0.25)
    assert infer(world, "acme/private/versions/2").status_code == 404


def test_a_version_taken_out_of_service_here_stops_calls_at_once(world: World) -> None:
    assert infer(world, "acme/public/versions/1").status_code == 200
    moved = world.client.post(
        "/api/models/acme/public/versions/1/transitions",
        json={"to": "deprecated"},
        headers=world.key("acme", "owner"),
    )
    assert moved.status_code == 201, moved.text
    refused = infer(world, "acme/public/versions/1")
    assert refused.status_code == 403
    assert refused.json() == {
        "error": "acme/public:1 is deprecated; other tenants may call it once approved",
        "code": "version_not_approved",
    }


def test_a_version_taken_out_of_service_elsewhere_stops_calls_within_twice_the_ttl(
    world: World, clock: ManualClock
) -> None:
    world.services.inference.targets.resolve_ttl = 0.1
    assert infer(world, "acme/public/versions/1").status_code == 200
    world.force_state("acme", "public", "1", "deprecated")
    clock.advance(0.25)
    assert infer(world, "acme/public/versions/1").status_code == 403


def test_a_model_that_does_not_exist_yet_is_not_remembered(world: World) -> None:
    missing = infer(world, "acme/later")
    assert missing.status_code == 404 and "not found" in missing.json()["error"]
    world.services.registry.create_model("acme", "later", actor="seed", visibility="public")
    world.publish("acme", "later", "1")
    world.force_state("acme", "later", "1", "validated")
    world.force_state("acme", "later", "1", "approved")
    assert infer(world, "acme/later/versions/1").status_code == 200


def test_roles_still_decide_with_cached_facts(world: World) -> None:
    assert infer(world, "acme/public/versions/1").status_code == 200
    assert infer(world, "acme/public/versions/1", role="publisher").status_code == 403
    # A private model without a grant is hidden, cached or not.
    for _ in range(2):
        assert infer(world, "acme/private/versions/2").status_code == 404
