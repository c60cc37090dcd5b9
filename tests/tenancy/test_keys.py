"""API keys: format, storage, creation, listing, rotation, revocation, expiry, scopes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select

from modelport.clock import ManualClock
from modelport.errors import Forbidden, InvalidInput
from modelport.store.tables import ApiKeyRow
from modelport.tenancy.keys import KEY_PATTERN, hash_secret, parse_key
from modelport.tenancy.types import Principal
from tests.tenancy.conftest import ADMIN, World, bearer


def test_key_format_is_scannable_and_parsed_strictly() -> None:
    from modelport.tenancy.keys import format_key, new_key_id, new_secret

    key = format_key(new_key_id(), new_secret())
    assert key.startswith("mp_live_") and len(key) == len("mp_live_") + 16 + 1 + 40
    parsed = parse_key(key)
    assert parsed is not None and key == format_key(parsed.key_id, parsed.secret)
    leaked = f"config: token={key}\n"
    found = KEY_PATTERN.search(leaked)
    assert found is not None and found.group(0) == key
    for bad in ("", key[:-1], key + "x", key.replace("mp_live_", "mp_test_"), " " + key):
        assert parse_key(bad) is None
    assert len({new_secret() for _ in range(100)}) == 100


def test_create_shows_the_secret_once_and_stores_only_a_hash(world: World) -> None:
    response = world.client.post(
        "/api/keys", json={"name": "ci deploy"}, headers=world.key("acme", "deployer")
    )
    assert response.status_code == 201, response.text
    assert response.headers["cache-control"] == "no-store"
    body = response.json()
    secret = body["key"]
    parsed = parse_key(secret)
    assert parsed is not None and parsed.key_id == body["id"]
    assert body["principal"] == "acme/deployer" and body["scopes"] is None
    with world.services.database.transaction() as session:
        row = session.scalar(select(ApiKeyRow).where(ApiKeyRow.id == body["id"]))
        assert row is not None
        stored = [str(v) for v in vars(row).values()]
        assert row.secret_hash == hash_secret(parsed.key_id, parsed.secret)
    assert not any(parsed.secret in value for value in stored)
    shown = world.client.get(f"/api/keys/{body['id']}", headers=world.key("acme", "deployer"))
    assert shown.status_code == 200 and "key" not in shown.json()
    assert world.client.get("/api/models", headers=bearer(secret)).status_code == 200


def test_listing_keys(world: World) -> None:
    def ids(role: str, **params: str) -> set[str]:
        response = world.client.get("/api/keys", params=params, headers=world.key("acme", role))
        assert response.status_code == 200, response.text
        return {f"{k['principal']}" for k in response.json()["items"]}

    assert ids("consumer") == {"acme/consumer"}
    assert ids("owner") == {
        f"acme/{m}"
        for m in ("owner", "publisher", "approver", "deployer", "consumer", "billing", "ci")
    }
    assert ids("owner", member="ci") == {"acme/ci"}
    other = world.client.get(
        "/api/keys", params={"member": "owner"}, headers=world.key("acme", "consumer")
    )
    assert other.status_code == 403
    everyone = world.client.get("/api/keys", headers=ADMIN).json()["items"]
    assert {k["tenant"] for k in everyone} == {"acme", "globex"}


def test_revoked_keys_stop_at_once(world: World) -> None:
    consumer = world.key("acme", "consumer")
    assert world.client.get("/api/models", headers=consumer).status_code == 200  # now cached
    key_id = world.keys["acme", "consumer"].split("_")[2]
    revoked = world.client.delete(f"/api/keys/{key_id}", headers=world.key("acme", "owner"))
    assert revoked.status_code == 200 and revoked.json()["revoked_at"]
    response = world.client.get("/api/models", headers=consumer)
    assert response.status_code == 401 and response.json()["code"] == "key_revoked"
    # Revoking again changes nothing; rotating a revoked key is refused.
    again = world.client.delete(f"/api/keys/{key_id}", headers=world.key("acme", "owner"))
    assert again.json()["revoked_at"] == revoked.json()["revoked_at"]
    rotate = world.client.post(f"/api/keys/{key_id}/rotate", headers=world.key("acme", "owner"))
    assert rotate.status_code == 409 and rotate.json()["code"] == "key_revoked"


def test_a_key_may_revoke_itself(world: World) -> None:
    publisher = world.key("acme", "publisher")
    key_id = world.keys["acme", "publisher"].split("_")[2]
    assert world.client.delete(f"/api/keys/{key_id}", headers=publisher).status_code == 200
    assert world.client.get("/api/models", headers=publisher).status_code == 401


def test_rotation_replaces_the_key(world: World) -> None:
    old = world.keys["acme", "approver"]
    old_id = old.split("_")[2]
    assert world.client.get("/api/models", headers=bearer(old)).status_code == 200
    response = world.client.post(f"/api/keys/{old_id}/rotate", headers=bearer(old))
    assert response.status_code == 201, response.text
    new = response.json()
    assert new["rotated_from"] == old_id and new["id"] != old_id and new["name"] == "seed"
    assert world.client.get("/api/models", headers=bearer(old)).status_code == 401
    assert world.client.get("/api/models", headers=bearer(new["key"])).status_code == 200
    listed = world.client.get("/api/keys", headers=bearer(new["key"])).json()["items"]
    states = {k["id"]: k["revoked_at"] is not None for k in listed}
    assert states == {old_id: True, new["id"]: False}


def test_expired_keys_stop_working(world: World, clock: ManualClock) -> None:
    response = world.client.post(
        "/api/keys",
        json={"name": "short", "expires_in_seconds": 1},
        headers=world.key("acme", "consumer"),
    )
    assert response.status_code == 201
    short = bearer(response.json()["key"])
    assert world.client.get("/api/models", headers=short).status_code == 200
    clock.advance(1.1)
    expired = world.client.get("/api/models", headers=short)
    assert expired.status_code == 401 and expired.json()["code"] == "key_expired"


def test_expiry_must_be_in_the_future_and_zoned(world: World) -> None:
    owner = world.key("acme", "owner")
    past = (datetime.now(UTC) - timedelta(days=1)).isoformat()
    for body in (
        {"name": "k", "expires_at": past},
        {"name": "k", "expires_at": "2999-01-01T00:00:00"},
        {"name": "k", "expires_at": "2999-01-01T00:00:00Z", "expires_in_seconds": 5},
    ):
        response = world.client.post("/api/keys", json=body, headers=owner)
        assert response.status_code == 400, response.text
        assert response.json()["code"] == "invalid_expiry"
    future = {"name": "k", "expires_at": "2999-01-01T00:00:00Z"}
    created = world.client.post("/api/keys", json=future, headers=owner).json()
    assert created["expires_at"].startswith("2999-01-01T00:00:00")


def test_scoped_keys(world: World) -> None:
    owner = world.key("acme", "owner")
    response = world.client.post(
        "/api/keys",
        json={"name": "calls only", "scopes": ["model.call", "model.read"]},
        headers=owner,
    )
    assert response.status_code == 201
    narrow = bearer(response.json()["key"])
    ok = world.client.post(
        "/v2/models/acme/private/versions/1/infer",
        json={"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1, 2, 3, 4]}]},
        headers=narrow,
    )
    assert ok.status_code == 200, ok.text
    create = world.client.post("/api/models", json={"owner": "acme", "name": "n"}, headers=narrow)
    assert create.status_code == 403
    # It cannot mint itself (or anyone) a wider key, nor manage keys at all.
    wider = world.client.post("/api/keys", json={"name": "wider"}, headers=narrow)
    assert wider.status_code == 403
    unknown = world.client.post("/api/keys", json={"name": "k", "scopes": ["root"]}, headers=owner)
    assert unknown.status_code == 400 and unknown.json()["code"] == "invalid_scope"


def test_a_scoped_key_delegates_at_most_its_scopes(world: World) -> None:
    owner = world.key("acme", "owner")
    scopes = ["keys.self", "keys.manage", "model.read"]
    made = world.client.post("/api/keys", json={"name": "keys", "scopes": scopes}, headers=owner)
    keyring = bearer(made.json()["key"])
    escalate = world.client.post(
        "/api/keys",
        json={"name": "x", "member": "publisher", "scopes": ["model.register"]},
        headers=keyring,
    )
    assert escalate.status_code == 403 and escalate.json()["code"] == "scope_not_held"
    inherit = world.client.post(
        "/api/keys", json={"name": "x", "member": "publisher"}, headers=keyring
    )
    assert inherit.status_code == 201
    assert inherit.json()["scopes"] == sorted(scopes)


def test_an_unscoped_key_cannot_mint_a_scope_its_roles_do_not_hold(world: World) -> None:
    owner = world.key("acme", "owner")  # made without scopes: all an owner's roles allow
    for scopes in (["platform.manage"], ["model.call", "platform.manage"]):
        minted = world.client.post(
            "/api/keys", json={"name": "root", "scopes": scopes}, headers=owner
        )
        assert minted.status_code == 403, minted.text
        body = minted.json()
        assert body["code"] == "scope_not_held" and body["scope"] == "platform.manage"
    publisher = world.key("acme", "publisher")
    minted = world.client.post(
        "/api/keys", json={"name": "x", "scopes": ["keys.manage"]}, headers=publisher
    )
    assert minted.status_code == 403 and minted.json()["code"] == "scope_not_held"
    names = {k.name for k in world.services.tenancy.list_keys(tenant="acme")}
    assert names == {"seed"}  # nothing was made


def test_the_service_refuses_scopes_the_issuer_does_not_hold(world: World) -> None:
    tenancy = world.services.tenancy
    issuer = Principal(id="acme/owner", roles=frozenset({"owner"}), tenant="acme")
    with pytest.raises(Forbidden) as caught:
        tenancy.create_key(
            "acme", "owner", name="x", scopes=["platform.manage"], actor=issuer.id, issuer=issuer
        )
    assert caught.value.code == "scope_not_held"
    with pytest.raises(InvalidInput) as unknown:  # an unknown scope is a 400 first
        tenancy.create_key("acme", "owner", name="x", scopes=["root"], actor="x", issuer=issuer)
    assert unknown.value.code == "invalid_scope"
    made = tenancy.create_key("acme", "owner", name="x", actor=issuer.id, issuer=issuer)
    assert made.key.scopes is None


def test_removed_members_lose_their_keys(world: World) -> None:
    billing = world.key("acme", "billing")
    assert world.client.get("/api/models", headers=billing).status_code == 200
    owner = world.key("acme", "owner")
    removed = world.client.delete("/api/tenants/acme/members/billing", headers=owner)
    assert removed.status_code == 204
    assert world.client.get("/api/models", headers=billing).status_code == 401
    missing = world.client.get("/api/tenants/acme/members/billing", headers=owner)
    assert missing.status_code == 404
    # Added back, the same principal has new roles and no keys.
    back = world.client.post(
        "/api/tenants/acme/members", json={"name": "billing", "roles": ["consumer"]}, headers=owner
    )
    assert back.status_code == 201 and back.json()["roles"] == ["consumer"]
    assert world.client.get("/api/models", headers=billing).status_code == 401
    duplicate = world.client.post(
        "/api/tenants/acme/members", json={"name": "billing", "roles": ["consumer"]}, headers=owner
    )
    assert duplicate.status_code == 409 and duplicate.json()["code"] == "member_exists"


def test_a_tenant_keeps_an_owner(world: World) -> None:
    owner = world.key("acme", "owner")
    for method, body in (("DELETE", None), ("PATCH", {"roles": ["consumer"]})):
        response = world.client.request(
            method, "/api/tenants/acme/members/owner", json=body, headers=owner
        )
        assert response.status_code == 409 and response.json()["code"] == "last_owner"
    assert world.client.get("/api/models", headers=owner).status_code == 200
    world.client.patch(
        "/api/tenants/acme/members/consumer", json={"roles": ["owner"]}, headers=owner
    )
    assert world.client.delete("/api/tenants/acme/members/owner", headers=owner).status_code == 204
    assert world.client.get("/api/models", headers=owner).status_code == 401


def test_admin_makes_keys_for_named_members(world: World) -> None:
    nameless = world.client.post("/api/keys", json={"name": "k"}, headers=ADMIN)
    assert nameless.status_code == 400
    made = world.client.post(
        "/api/keys", json={"name": "k", "tenant": "globex", "member": "ci"}, headers=ADMIN
    )
    assert made.status_code == 201 and made.json()["created_by"] == "admin"
    ghost = world.client.post(
        "/api/keys", json={"name": "k", "tenant": "globex", "member": "ghost"}, headers=ADMIN
    )
    assert ghost.status_code == 404 and ghost.json()["code"] == "member_not_found"


def test_owners_cannot_obtain_keys_of_platform_admins_in_their_tenant(world: World) -> None:
    made = world.client.post(
        "/api/tenants/acme/members", json={"name": "root", "roles": ["admin"]}, headers=ADMIN
    )
    assert made.status_code == 201
    owner = world.key("acme", "owner")
    refused = world.client.post("/api/keys", json={"name": "k", "member": "root"}, headers=owner)
    assert refused.status_code == 403 and refused.json()["code"] == "holder_outranks_issuer"
    issued = world.client.post(
        "/api/keys", json={"name": "k", "tenant": "acme", "member": "root"}, headers=ADMIN
    ).json()
    # The owner may see and revoke it, not rotate it (that would hand it the new secret).
    rotate = world.client.post(f"/api/keys/{issued['id']}/rotate", headers=owner)
    assert rotate.status_code == 403
    root = bearer(issued["key"])
    assert world.client.get("/api/tenants", headers=root).json()["items"][0]["slug"] == "acme"
    assert len(world.client.get("/api/tenants", headers=root).json()["items"]) == 2
    assert world.client.delete(f"/api/keys/{issued['id']}", headers=owner).status_code == 200
    assert world.client.get("/api/tenants", headers=root).status_code == 401


def test_an_operator_key_scoped_without_model_call_calls_nothing(world: World) -> None:
    """Its scopes bound the operator on the inference path as on ``/api``: it may read
    every tenant's models, and is refused calling them (403, not hidden)."""
    made = world.client.post(
        "/api/tenants/acme/members", json={"name": "root", "roles": ["admin"]}, headers=ADMIN
    )
    assert made.status_code == 201
    issued = world.client.post(
        "/api/keys",
        json={
            "name": "ops",
            "tenant": "acme",
            "member": "root",
            "scopes": ["platform.manage", "model.read"],
        },
        headers=ADMIN,
    )
    assert issued.status_code == 201, issued.text
    ops = bearer(issued.json()["key"])
    assert world.client.get("/api/models/globex/private", headers=ops).status_code == 200
    tensor = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1, 2, 3, 4]}]}
    for path in ("globex/private/versions/2", "acme/private/versions/1"):
        refused = world.client.post(f"/v2/models/{path}/infer", json=tensor, headers=ops)
        assert refused.status_code == 403, refused.text
        assert refused.json()["error"] == "this API key does not allow model.call"
