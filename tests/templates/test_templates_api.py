"""/api/templates on SQLite and PostgreSQL: publish immutable versions (the same manifest
again is a no-op, another is 409), read, list and render them; another tenant sees a
private template only through a grant, and a public one without."""

from __future__ import annotations

from typing import Any

from starlette.testclient import TestClient

from modelport.app import Services

MANIFEST: dict[str, Any] = {
    "license": "MIT",
    "description": "Support answers",
    "messages": [
        {"role": "system", "content": "You answer for {{company}}."},
        {"role": "user", "content": "{{question}}"},
    ],
    "variables": [{"name": "company", "default": "Acme"}, {"name": "question"}],
}


def keys(services: Services) -> dict[str, dict[str, str]]:
    """Bearer headers: acme's publisher, globex's consumer."""
    tenancy = services.tenancy
    found = {}
    for tenant, role in (("acme", "publisher"), ("globex", "consumer")):
        tenancy.create_tenant(tenant, actor="admin")
        tenancy.add_member(tenant, role, roles=[role], actor="admin")
        secret = tenancy.create_key(tenant, role, name="t", actor="admin").secret
        found[tenant] = {"Authorization": f"Bearer {secret}"}
    return found


def test_templates_are_published_read_rendered_and_shared(
    client: TestClient, services: Services
) -> None:
    key = keys(services)
    acme, globex = key["acme"], key["globex"]
    created = client.post("/api/templates", json={"owner": "acme", "name": "support"}, headers=acme)
    assert created.status_code == 201, created.text
    again = client.post("/api/templates", json={"owner": "acme", "name": "support"}, headers=acme)
    assert again.status_code == 409 and again.json()["code"] == "template_exists"

    published = client.post(
        "/api/templates/acme/support/versions",
        json={"version": "1", "manifest": MANIFEST},
        headers=acme,
    )
    assert published.status_code == 201, published.text
    digest = published.json()["digest"]
    same = client.post(
        "/api/templates/acme/support/versions",
        json={"version": "1", "manifest": MANIFEST},
        headers=acme,
    )
    assert same.status_code == 200 and same.json()["digest"] == digest
    changed = {**MANIFEST, "description": "changed"}
    other = client.post(
        "/api/templates/acme/support/versions",
        json={"version": "1", "manifest": changed},
        headers=acme,
    )
    assert other.status_code == 409 and other.json()["code"] == "template_version_exists"
    bad = client.post(
        "/api/templates/acme/support/versions",
        json={"version": "2", "manifest": {**MANIFEST, "variables": []}},
        headers=acme,
    )
    assert bad.status_code == 400 and bad.json()["code"] == "invalid_template_manifest"

    rendered = client.post(
        "/api/templates/acme/support/versions/1/render",
        json={"variables": {"question": "Where is it?"}},
        headers=acme,
    )
    assert rendered.status_code == 200, rendered.text
    assert rendered.json() == {
        "template": "acme/support:1",
        "digest": digest,
        "messages": [
            {"role": "system", "content": "You answer for Acme."},
            {"role": "user", "content": "Where is it?"},
        ],
    }
    missing = client.post("/api/templates/acme/support/versions/1/render", json={}, headers=acme)
    assert missing.status_code == 400 and missing.json()["code"] == "missing_variable"

    # Private: another tenant cannot tell it from a template that does not exist.
    for path in ("/api/templates/acme/support", "/api/templates/acme/support/versions/1"):
        hidden = client.get(path, headers=globex)
        assert hidden.status_code == 404 and hidden.json()["code"] == "template_not_found"
    assert client.get("/api/templates", headers=globex).json()["items"] == []
    shared = client.post(
        "/api/grants", json={"namespace": "acme", "grantee": "globex", "model": "support"}
    )
    assert shared.status_code == 201, shared.text
    seen = client.get("/api/templates/acme/support", headers=globex)
    assert seen.status_code == 200 and seen.json()["latest"]["version"] == "1"
    assert [t["name"] for t in client.get("/api/templates", headers=globex).json()["items"]] == [
        "support"
    ]
    readable = client.post(
        "/api/templates/acme/support/versions/1/render",
        json={"variables": {"question": "?"}},
        headers=globex,
    )
    assert readable.status_code == 200
    # Reading is all a grant gives: publishing stays the namespace's.
    refused = client.post(
        "/api/templates/acme/support/versions",
        json={"version": "2", "manifest": MANIFEST},
        headers=globex,
    )
    assert refused.status_code == 403


def test_a_public_template_is_listed_for_everyone(client: TestClient, services: Services) -> None:
    key = keys(services)
    body = {"owner": "acme", "name": "greeting", "visibility": "public"}
    assert client.post("/api/templates", json=body, headers=key["acme"]).status_code == 201
    listed = client.get("/api/templates", headers=key["globex"]).json()["items"]
    assert [(t["owner"], t["name"], t["visibility"]) for t in listed] == [
        ("acme", "greeting", "public")
    ]
    wrong = client.post(
        "/api/templates", json={**body, "name": "x", "visibility": "secret"}, headers=key["acme"]
    )
    assert wrong.status_code == 400 and wrong.json()["code"] == "invalid_visibility"
