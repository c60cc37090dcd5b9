"""Grants share private models across tenants; public models are callable once approved."""

from __future__ import annotations

import httpx

from tests.tenancy.conftest import ADMIN, World

INPUT = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1, 2, 3, 4]}]}


def infer(world: World, path: str, headers: dict[str, str]) -> httpx.Response:
    return world.client.post(f"/v2/models/{path}/infer", json=INPUT, headers=headers)


def grant(world: World, body: dict[str, str], role: str = "owner") -> httpx.Response:
    return world.client.post("/api/grants", json=body, headers=world.key("acme", role))


def test_a_model_grant_shares_one_private_model(world: World) -> None:
    consumer = world.key("globex", "consumer")
    assert world.client.get("/api/models/acme/private", headers=consumer).status_code == 404
    world.services.registry.create_model("acme", "other", actor="seed")

    created = grant(world, {"grantee": "globex", "model": "private"})
    assert created.status_code == 201, created.text
    body = created.json()
    assert body["namespace"] == "acme" and body["model"] == "private"
    assert body["grantee"] == "globex" and body["created_by"] == "acme/owner"
    again = grant(world, {"grantee": "globex", "model": "private"})
    assert again.status_code == 200 and again.json()["id"] == body["id"]

    assert world.client.get("/api/models/acme/private", headers=consumer).status_code == 200
    assert world.client.get("/api/models/acme/other", headers=consumer).status_code == 404
    page = world.client.get("/api/models", params={"owner": "acme"}, headers=consumer).json()
    assert sorted(m["model"] for m in page["items"]) == ["acme/private", "acme/public"]
    # Shared means read and call: approved versions only, and nothing more.
    assert infer(world, "acme/private/versions/2", consumer).status_code == 200
    refused = infer(world, "acme/private/versions/1", consumer)
    assert refused.status_code == 403 and "approved" in refused.json()["error"]
    assert refused.json()["code"] == "version_not_approved"
    assert (
        infer(world, "acme/private/versions/2", world.key("globex", "billing")).status_code == 403
    )
    load = world.client.post(
        "/v2/repository/models/acme/private/load", json={}, headers=world.key("globex", "owner")
    )
    assert load.status_code == 403
    alias = world.client.put(
        "/api/models/acme/private/aliases/stable",
        json={"version": "2"},
        headers=world.key("globex", "owner"),
    )
    assert alias.status_code == 403

    # Both sides see the grant; only the granting tenant withdraws it.
    for side in ("acme", "globex"):
        listed = world.client.get("/api/grants", headers=world.key(side, "owner")).json()
        assert [g["id"] for g in listed["items"]] == [body["id"]]
    path = f"/api/grants/{body['id']}"
    assert world.client.delete(path, headers=world.key("globex", "owner")).status_code == 403
    assert world.client.delete(path, headers=world.key("acme", "consumer")).status_code == 403
    assert world.client.delete(path, headers=world.key("acme", "owner")).status_code == 204
    assert world.client.get("/api/models/acme/private", headers=consumer).status_code == 404
    assert world.client.get(path, headers=world.key("acme", "owner")).status_code == 404


def test_a_namespace_grant_shares_every_private_model(world: World) -> None:
    world.services.registry.create_model("acme", "other", actor="seed")
    assert grant(world, {"grantee": "globex"}).status_code == 201
    consumer = world.key("globex", "consumer")
    for name in ("private", "other"):
        assert world.client.get(f"/api/models/acme/{name}", headers=consumer).status_code == 200
    # The grant is to globex only.
    world.services.tenancy.create_tenant("initech", owner="boss", actor="admin")
    outsider = world.services.tenancy.create_key("initech", "boss", name="k", actor="admin")
    response = world.client.get(
        "/api/models/acme/private", headers={"Authorization": f"Bearer {outsider.secret}"}
    )
    assert response.status_code == 404


def test_bad_grants(world: World) -> None:
    to_self = grant(world, {"grantee": "acme"})
    assert to_self.status_code == 400 and to_self.json()["code"] == "invalid_grant"
    unknown = grant(world, {"grantee": "nobody"})
    assert unknown.status_code == 404 and unknown.json()["code"] == "tenant_not_found"
    no_model = grant(world, {"grantee": "globex", "model": "ghost"})
    assert no_model.status_code == 404 and no_model.json()["code"] == "model_not_found"
    not_owner = grant(world, {"grantee": "globex"}, role="publisher")
    assert not_owner.status_code == 403
    by_admin = world.client.post(
        "/api/grants", json={"namespace": "acme", "grantee": "globex"}, headers=ADMIN
    )
    assert by_admin.status_code == 201


def test_public_models_are_callable_by_any_consumer_once_approved(world: World) -> None:
    consumer = world.key("globex", "consumer")
    assert infer(world, "acme/public/versions/1", consumer).status_code == 200
    # Without a version, the default resolution picks the approved one.
    assert infer(world, "acme/public", consumer).status_code == 200
    candidate = infer(world, "acme/public/versions/2", consumer)
    assert candidate.status_code == 403
    assert candidate.json() == {
        "error": "acme/public:2 is candidate; other tenants may call it once approved",
        "code": "version_not_approved",
    }
    # Inside the tenant, a consumer may call a candidate.
    assert infer(world, "acme/public/versions/2", world.key("acme", "consumer")).status_code == 200
    # Roles still apply: a publisher of globex may not call, nor publish into acme/public.
    assert (
        infer(world, "acme/public/versions/1", world.key("globex", "publisher")).status_code == 403
    )
    response = world.client.post(
        "/api/models/acme/public/versions/2/transitions",
        json={"to": "rejected"},
        headers=world.key("globex", "approver"),
    )
    assert response.status_code == 403
    metadata = world.client.get("/v2/models/acme/public", headers=consumer)
    assert metadata.status_code == 200 and metadata.json()["name"] == "acme/public"
