"""Separation of duties: where a tenant requires it, nobody approves their own version."""

from __future__ import annotations

import httpx

from tests.registry.helpers import manifest_for
from tests.tenancy.conftest import World, model_bytes


def publish_and_validate(world: World, headers: dict[str, str], version: str) -> None:
    manifest = manifest_for(model_bytes("acme/private"))
    response = world.client.post(
        "/api/models/acme/private/versions",
        json={"version": version, "manifest": manifest},
        headers=headers,
    )
    assert response.status_code == 201, response.text
    world.force_state("acme", "private", version, "validated")


def decide(world: World, headers: dict[str, str], version: str, to: str) -> httpx.Response:
    return world.client.post(
        f"/api/models/acme/private/versions/{version}/transitions",
        json={"to": to, "reason": "review"},
        headers=headers,
    )


def test_separation_of_duties(world: World) -> None:
    tenancy = world.services.tenancy
    tenancy.add_member("acme", "solo", roles=["publisher", "approver"], actor="admin")
    solo = {
        "Authorization": "Bearer " + tenancy.create_key("acme", "solo", name="k", actor="a").secret
    }
    owner = world.key("acme", "owner")

    # Off (the default): one person may publish and approve.
    publish_and_validate(world, solo, "s1")
    assert decide(world, solo, "s1", "approved").status_code == 201

    assert world.client.patch(
        "/api/tenants/acme", json={"require_separation": True}, headers=owner
    ).json()["require_separation"]
    for to in ("approved", "rejected"):
        version = f"s-{to}"
        publish_and_validate(world, solo, version)
        refused = decide(world, solo, version, to)
        assert refused.status_code == 403, refused.text
        assert refused.json()["code"] == "separation_of_duties"
        # Another approver may.
        assert decide(world, world.key("acme", "approver"), version, to).status_code == 201

    # The owner holds version.override: it may approve what it published itself.
    publish_and_validate(world, owner, "o1")
    assert decide(world, owner, "o1", "approved").status_code == 201
    # Deploying one's own version is not an approval.
    tenancy.set_roles("acme", "solo", ["publisher", "approver", "deployer"])
    assert decide(world, solo, "s1", "deployed").status_code == 201


def test_separation_of_duties_is_tenancys_rule_not_the_routes(world: World) -> None:
    """Checked by the tenancy service itself, so any surface (a CLI, a job) gets it."""
    import pytest

    from modelport.errors import Forbidden
    from modelport.tenancy.types import Principal

    tenancy = world.services.tenancy
    tenancy.update_tenant("acme", require_separation=True)
    solo = Principal("solo", frozenset({"publisher", "approver"}), tenant="acme")
    with pytest.raises(Forbidden) as refused:
        tenancy.check_transition(solo, "acme", "acme/private:3", "solo", "approved")
    assert refused.value.code == "separation_of_duties"
    tenancy.check_transition(solo, "acme", "acme/private:3", "someone-else", "approved")
    tenancy.check_transition(solo, "acme", "acme/private:3", "solo", "validated")
    overriding = Principal("solo", frozenset({"owner"}), tenant="acme")
    tenancy.check_transition(overriding, "acme", "acme/private:3", "solo", "rejected")
