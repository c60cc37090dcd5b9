"""A key never obtains a key that can do more than itself (403 ``scope_not_held``):
not by creating one, and not by rotating someone else's wider key into its hands."""

from __future__ import annotations

from tests.security.world import ATTACKER, World


def _scoped(world: World, *scopes: str) -> dict[str, str]:
    issued = world.services.tenancy.create_key(
        ATTACKER, "owner", name="narrow", actor="admin", scopes=list(scopes)
    )
    return {"Authorization": f"Bearer {issued.secret}"}


def test_a_scoped_key_cannot_create_a_wider_one(world: World) -> None:
    narrow = _scoped(world, "keys.manage", "tenant.read")
    for body in (
        {"name": "wide", "scopes": ["model.call"]},
        {"name": "wide", "member": "consumer", "scopes": ["usage.read"]},
    ):
        response = world.client.post("/api/keys", json=body, headers=narrow)
        assert response.status_code == 403 and response.json()["code"] == "scope_not_held"
    inherited = world.client.post(
        "/api/keys", json={"name": "same", "member": "consumer"}, headers=narrow
    )
    assert inherited.status_code == 201, inherited.text
    assert inherited.json()["scopes"] == ["keys.manage", "tenant.read"]


def test_a_scoped_key_cannot_rotate_a_wider_key_into_its_hands(world: World) -> None:
    narrow = _scoped(world, "keys.manage", "tenant.read")
    wide = world.services.tenancy.create_key(ATTACKER, "deployer", name="wide", actor="admin")
    response = world.client.post(f"/api/keys/{wide.key.id}/rotate", headers=narrow)
    assert response.status_code == 403, response.text
    assert response.json()["code"] == "scope_not_held"
    still = world.client.get(
        "/api/tenants/globex", headers={"Authorization": f"Bearer {wide.secret}"}
    )
    assert still.status_code == 200, "the refused rotation revoked the key anyway"
