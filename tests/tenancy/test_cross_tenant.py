"""Another tenant's private things: every resource type answers as if it did not exist.

The reference is a resource that really does not exist: the answer for acme's
private one, seen from globex, must be the same status and body (with the name
swapped), so nothing tells a hidden resource from a missing one.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from modelport.tenancy.keys import format_key
from tests.registry.helpers import manifest_for
from tests.tenancy.conftest import ADMIN, ROLES, World, model_bytes

VERSION = "/models/acme/{m}/versions/1"
MODEL_READS = [
    "/api/models/acme/{m}",
    "/api/models/acme/{m}/versions",
    "/api" + VERSION,
    "/api" + VERSION + "/events",
    "/api" + VERSION + "/validation",
    "/api" + VERSION + "/signatures",
    "/api" + VERSION + "/lineage",
    "/api/models/acme/{m}/aliases",
    "/api/models/acme/{m}/aliases/stable",
    "/api/models/acme/{m}/aliases/stable/history",
    "/v2/models/acme/{m}",
    "/v2" + VERSION,
    "/v2/models/acme/{m}/ready",
    "/v2" + VERSION + "/ready",
]
MODEL_WRITES: list[tuple[str, str, Any]] = [
    ("POST", "/api/models/acme/{m}/versions", "manifest"),
    ("POST", "/api" + VERSION + "/transitions", {"to": "rejected"}),
    ("POST", "/api" + VERSION + "/transitions", {"to": "approved"}),
    (
        "POST",
        "/api" + VERSION + "/signatures",
        {"public_key": "AAAA", "signature": "AAAA", "signer": "x"},
    ),
    ("PUT", "/api/models/acme/{m}/aliases/stable", {"version": "2"}),
    ("DELETE", "/api/models/acme/{m}/aliases/stable", None),
    ("POST", "/v2/models/acme/{m}/infer", {"inputs": []}),
    ("POST", "/v2" + VERSION + "/infer", {"inputs": []}),
    ("POST", "/v2/repository/models/acme/{m}/load", {}),
    ("POST", "/v2/repository/models/acme/{m}/unload", {}),
]


def same_as_missing(
    response: httpx.Response, missing: httpx.Response, hidden: str, ghost: str
) -> None:
    assert response.status_code == missing.status_code == 404, (response.text, missing.text)
    assert response.text == missing.text.replace(ghost, hidden)


def call(
    world: World, method: str, path: str, body: Any, headers: dict[str, str]
) -> httpx.Response:
    if body == "manifest":
        body = {"version": "9", "manifest": manifest_for(model_bytes("globex/private"))}
    return world.client.request(method, path, json=body, headers=headers)


@pytest.mark.parametrize("role", ROLES)
def test_private_models_are_invisible_to_other_tenants(world: World, role: str) -> None:
    headers = world.key("globex", role)
    for template in MODEL_READS:
        hidden = world.client.get(template.format(m="private"), headers=headers)
        missing = world.client.get(template.format(m="ghost"), headers=headers)
        same_as_missing(hidden, missing, "private", "ghost")
    for method, template, body in MODEL_WRITES:
        hidden = call(world, method, template.format(m="private"), body, headers)
        missing = call(world, method, template.format(m="ghost"), body, headers)
        same_as_missing(hidden, missing, "private", "ghost")
    # Nothing changed on acme's side.
    assert (
        world.client.get("/api/models/acme/private/aliases/stable", headers=ADMIN).json()["version"]
        == "1"
    )
    events = world.client.get("/api/models/acme/private/versions/1/events", headers=ADMIN)
    assert [e["to"] for e in events.json()["items"]] == ["candidate"]


def test_creating_in_another_namespace_is_refused_whether_or_not_the_model_exists(
    world: World,
) -> None:
    headers = world.key("globex", "owner")
    for name in ("private", "ghost"):
        response = world.client.post(
            "/api/models", json={"owner": "acme", "name": name}, headers=headers
        )
        assert response.status_code == 403, response.text


def test_the_catalog_lists_only_what_the_caller_may_see(world: World) -> None:
    def listed(headers: dict[str, str], **params: str) -> list[str]:
        page = world.client.get("/api/models", params=params, headers=headers).json()
        return sorted(m["model"] for m in page["items"])

    globex = world.key("globex", "consumer")
    assert listed(globex) == ["acme/public", "globex/private", "globex/public"]
    assert listed(globex, owner="acme") == ["acme/public"]
    assert listed(world.key("acme", "billing")) == ["acme/private", "acme/public", "globex/public"]
    assert listed(ADMIN) == ["acme/private", "acme/public", "globex/private", "globex/public"]
    # Paging through never reveals more.
    seen: list[str] = []
    cursor: str | None = None
    while True:
        params = {"limit": "1"} | ({"cursor": cursor} if cursor else {})
        page = world.client.get("/api/models", params=params, headers=globex).json()
        seen += [m["model"] for m in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert sorted(seen) == ["acme/public", "globex/private", "globex/public"]


def test_blobs_of_private_models_are_invisible_to_other_tenants(world: World) -> None:
    digest = world.digests["acme/private"]
    ghost = "sha256:" + "0" * 64
    for role in ("consumer", "owner"):
        headers = world.key("globex", role)
        hidden = world.client.get(f"/api/blobs/{digest}", headers=headers)
        missing = world.client.get(f"/api/blobs/{ghost}", headers=headers)
        same_as_missing(hidden, missing, digest, ghost)
    consumer = world.key("globex", "consumer")
    assert world.client.head(f"/api/blobs/{digest}", headers=consumer).status_code == 404
    # Public models' blobs are readable by anyone who can see the model.
    public = world.digests["acme/public"]
    assert world.client.get(f"/api/blobs/{public}", headers=consumer).status_code == 200
    # An uploader cannot learn whether another tenant's private blob is stored either:
    # only a tenant that holds the bytes sees them (and proves it by uploading them).
    publisher = world.key("globex", "publisher")
    hidden = world.client.head(f"/api/blobs/{digest}", headers=publisher)
    missing = world.client.head(f"/api/blobs/{ghost}", headers=publisher)
    assert hidden.status_code == missing.status_code == 404
    assert world.client.get(f"/api/blobs/{digest}", headers=publisher).status_code == 404
    uploaded = world.client.post(
        "/api/uploads",
        params={"digest": digest},
        content=model_bytes("acme/private"),
        headers=publisher,
    )
    assert uploaded.status_code == 201, uploaded.text
    assert world.client.head(f"/api/blobs/{digest}", headers=publisher).status_code == 200
    assert world.client.get(f"/api/blobs/{digest}", headers=publisher).status_code == 200
    # Holding it is the uploading tenant's, not every member's: a consumer key may not.
    assert world.client.get(f"/api/blobs/{digest}", headers=consumer).status_code == 404


def test_uploads_need_the_right_to_register_models(world: World) -> None:
    started = world.client.post("/api/uploads", headers=world.key("acme", "publisher"))
    assert started.status_code == 202
    upload = started.json()["id"]
    assert len(upload) >= 32  # the id is the upload's capability: unguessable
    for role in ("consumer", "approver", "deployer", "billing"):
        headers = world.key("globex", role)
        assert world.client.get(f"/api/uploads/{upload}", headers=headers).status_code == 403
        assert world.client.post("/api/uploads", headers=headers).status_code == 403


def test_a_hidden_model_cannot_be_named_as_a_lineage_parent(world: World) -> None:
    headers = world.key("globex", "publisher")

    def publish(parent: str, version: str) -> httpx.Response:
        manifest = manifest_for(
            model_bytes("globex/private"), parents=[{"model": parent, "version": "1"}]
        )
        return world.client.post(
            "/api/models/globex/private/versions",
            json={"version": version, "manifest": manifest},
            headers=headers,
        )

    hidden, missing = publish("acme/private", "10"), publish("acme/ghost", "10")
    assert hidden.status_code == missing.status_code == 400
    assert hidden.text == missing.text.replace("acme/ghost", "acme/private")
    assert publish("acme/public", "11").status_code == 201


def test_lineage_hides_what_the_caller_may_not_see(world: World) -> None:
    parent = [{"model": "acme/public", "version": "1"}]
    for owner in ("acme", "globex"):
        manifest = manifest_for(model_bytes(f"{owner}/private"), parents=parent)
        world.services.registry.publish(owner, "private", "child", manifest, actor="seed")

    def descendants(headers: dict[str, str]) -> list[str]:
        body = world.client.get("/api/models/acme/public/versions/1/lineage", headers=headers)
        return sorted(n["model"] for n in body.json()["descendants"])

    assert descendants(world.key("globex", "consumer")) == ["globex/private"]
    assert descendants(world.key("acme", "consumer")) == ["acme/private"]
    assert descendants(ADMIN) == ["acme/private", "globex/private"]


def test_keys_of_other_tenants_are_invisible(world: World) -> None:
    headers = world.key("globex", "owner")
    acme_key = world.services.tenancy.list_keys(tenant="acme", member="owner")[0].id
    ghost = "0" * 16
    for method, template in (
        ("GET", "/api/keys/{k}"),
        ("DELETE", "/api/keys/{k}"),
        ("POST", "/api/keys/{k}/rotate"),
    ):
        hidden = world.client.request(method, template.format(k=acme_key), headers=headers)
        missing = world.client.request(method, template.format(k=ghost), headers=headers)
        same_as_missing(hidden, missing, acme_key, ghost)
    hidden = world.client.get("/api/keys", params={"tenant": "acme"}, headers=headers)
    missing = world.client.get("/api/keys", params={"tenant": "ghost"}, headers=headers)
    same_as_missing(hidden, missing, "acme", "ghost")
    for member in ("owner", "consumer"):
        body = {"tenant": "acme", "member": member, "name": "mine now"}
        response = world.client.post("/api/keys", json=body, headers=headers)
        assert response.status_code == 404, response.text
    # ... and the acme key still works.
    assert world.client.get("/api/models", headers=world.key("acme", "owner")).status_code == 200
    # Own keys: listed without their secrets.
    listed = world.client.get("/api/keys", headers=headers).json()["items"]
    assert {k["tenant"] for k in listed} == {"globex"}
    assert all("key" not in k for k in listed)


@pytest.mark.parametrize(
    ("method", "template", "body"),
    [
        ("GET", "/api/tenants/{t}", None),
        ("PATCH", "/api/tenants/{t}", {"name": "mine"}),
        ("GET", "/api/tenants/{t}/members", None),
        ("POST", "/api/tenants/{t}/members", {"name": "mole", "roles": ["owner"]}),
        ("GET", "/api/tenants/{t}/members/owner", None),
        ("PATCH", "/api/tenants/{t}/members/owner", {"roles": ["consumer"]}),
        ("DELETE", "/api/tenants/{t}/members/owner", None),
        ("GET", "/api/audit?tenant={t}", None),
        ("GET", "/api/grants?tenant={t}", None),
        ("POST", "/api/grants", {"namespace": "{t}", "grantee": "globex"}),
    ],
)
def test_other_tenants_settings_members_grants_and_audit_are_invisible(
    world: World, method: str, template: str, body: Any
) -> None:
    headers = world.key("globex", "owner")

    def send(tenant: str) -> httpx.Response:
        payload = (
            None
            if body is None
            else {k: v.format(t=tenant) if isinstance(v, str) else v for k, v in body.items()}
        )
        return world.client.request(
            method, template.format(t=tenant), json=payload, headers=headers
        )

    same_as_missing(send("acme"), send("ghost"), "acme", "ghost")
    assert [m.name for m in world.services.tenancy.list_members("acme")] == sorted([*ROLES, "ci"])


def test_grants_between_others_are_invisible(world: World) -> None:
    world.services.tenancy.create_tenant("initech", actor="admin")
    grant, _ = world.services.tenancy.create_grant("acme", "initech", actor="admin")
    headers = world.key("globex", "owner")
    for method in ("GET", "DELETE"):
        hidden = world.client.request(method, f"/api/grants/{grant.id}", headers=headers)
        missing = world.client.request(method, "/api/grants/999999", headers=headers)
        same_as_missing(hidden, missing, str(grant.id), "999999")
    assert world.client.get("/api/grants", headers=headers).json()["items"] == []


def test_the_audit_log_shows_owners_only_their_tenant(world: World) -> None:
    world.client.post(
        "/api/models", json={"owner": "acme", "name": "secret"}, headers=world.key("acme", "owner")
    )
    world.client.post(
        "/api/models",
        json={"owner": "globex", "name": "open"},
        headers=world.key("globex", "owner"),
    )
    items = world.client.get("/api/audit", headers=world.key("globex", "owner")).json()["items"]
    assert items and all("globex" in (e["tenant"], e["actor_tenant"]) for e in items)
    assert not any("acme" in (e["tenant"], e["actor_tenant"]) for e in items)


def test_the_v2_repository_index_lists_only_visible_models(world: World) -> None:
    for owner in ("acme", "globex"):
        response = world.client.post(
            f"/v2/repository/models/{owner}/private/load",
            json={"parameters": {"version": "1"}},
            headers=ADMIN,
        )
        assert response.status_code == 200, response.text

    def index(headers: dict[str, str]) -> list[str]:
        response = world.client.post("/v2/repository/index", json={}, headers=headers)
        return sorted(row["name"] for row in response.json())

    assert index(world.key("globex", "consumer")) == ["globex/private"]
    assert index(ADMIN) == ["acme/private", "globex/private"]


def test_a_key_id_of_another_tenant_with_any_secret_is_401(world: World) -> None:
    acme_key = world.services.tenancy.list_keys(tenant="acme", member="owner")[0].id
    forged = format_key(acme_key, "A" * 40)
    response = world.client.get("/api/models", headers={"Authorization": f"Bearer {forged}"})
    assert response.status_code == 401
