"""/api/tenants/{tenant}/moderation-policy and /api/moderation/decisions: owners only,
each change a new version in force at once, decisions in cursor pages, a tenant never
sees another's."""

from __future__ import annotations

from typing import Any

from tests.moderation.conftest import World

POLICY = {
    "strictness": "high",
    "rules": [{"category": "secrets", "patterns": [r"password\s*="], "severity": "medium"}],
    "sync": True,
}


def as_key(world: World, key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def put(world: World, body: dict[str, Any], key: str | None = None, tenant: str = "beta") -> Any:
    return world.platform.client.put(
        f"/api/tenants/{tenant}/moderation-policy",
        json=body,
        headers=as_key(world, key or world.owner_key),
    )


def get(world: World, path: str, key: str | None = None, **params: Any) -> Any:
    return world.platform.client.get(
        path, params=params, headers=as_key(world, key or world.owner_key)
    )


def test_each_change_is_a_new_version_in_force_at_once(moderated: World) -> None:
    missing = get(moderated, "/api/tenants/beta/moderation-policy")
    assert missing.status_code == 404
    assert missing.json()["code"] == "moderation_policy_not_found"
    first = put(moderated, POLICY)
    assert first.status_code == 200, first.text
    doc = first.json()
    assert (doc["tenant"], doc["version"], doc["strictness"], doc["sync"]) == (
        "beta",
        1,
        "high",
        True,
    )
    assert doc["rules"][0]["severity"] == "medium" and doc["created_by"]
    assert moderated.say("password = 1").status_code == 400  # in force at once
    second = put(moderated, {**POLICY, "strictness": "off"}).json()
    assert (second["id"], second["version"]) == (doc["id"], 2)
    assert get(moderated, "/api/tenants/beta/moderation-policy").json()["version"] == 2
    old = get(moderated, "/api/tenants/beta/moderation-policy", version=1).json()
    assert old["strictness"] == "high"
    assert moderated.say("password = 1").status_code == 200


def test_only_the_tenants_owners_manage_its_policy(moderated: World) -> None:
    consumer = moderated.platform.key  # beta's consumer
    assert put(moderated, POLICY, key=consumer).status_code == 403
    assert get(moderated, "/api/tenants/beta/moderation-policy", key=consumer).status_code == 403
    # Another tenant's key: the tenant is not there for it.
    gamma = moderated.gamma_key
    assert put(moderated, POLICY, key=gamma).status_code == 404
    assert put(moderated, POLICY).status_code == 200
    assert get(moderated, "/api/tenants/beta/moderation-policy", key=gamma).status_code == 404


def test_a_policy_that_cannot_work_is_refused(moderated: World) -> None:
    bad = put(moderated, {"rules": [{"category": "x", "patterns": ["(oops"]}]})
    assert bad.status_code == 400 and bad.json()["code"] == "invalid_pattern"
    assert put(moderated, {"strictness": "extreme"}).status_code == 400
    assert put(moderated, {"thresholds": {"x": {"flag": 0.9, "block": 0.1}}}).status_code == 400


def test_decisions_in_pages_with_filters_and_only_ones_own(moderated: World) -> None:
    assert put(moderated, POLICY).status_code == 200
    for i in range(3):
        assert moderated.say(f"password = {i}", request_id=f"r{i}").status_code == 400
    assert moderated.say("hello", request_id="ok").status_code == 200  # input and output
    first = get(moderated, "/api/moderation/decisions", limit=2).json()
    assert len(first["items"]) == 2 and first["next_cursor"]
    rest = get(moderated, "/api/moderation/decisions", cursor=first["next_cursor"]).json()
    items = first["items"] + rest["items"]
    assert len(items) == 5 and rest["next_cursor"] is None
    newest = items[0]
    assert set(newest) >= {
        "request_id",
        "job_id",
        "model",
        "version",
        "policy_id",
        "policy_version",
        "disposition",
        "reason",
        "stage",
        "created_at",
        "tenant",
    }
    blocked = get(moderated, "/api/moderation/decisions", disposition="blocked").json()["items"]
    assert sorted(d["request_id"] for d in blocked) == ["r0", "r1", "r2"]
    one = get(moderated, "/api/moderation/decisions", request_id="ok", stage="output").json()
    assert [(d["stage"], d["disposition"]) for d in one["items"]] == [("output", "allowed")]
    # Naming beta is, for gamma, the 404 of a tenant it cannot see.
    gamma = moderated.gamma_key
    assert get(moderated, "/api/moderation/decisions", key=gamma, tenant="beta").status_code == 404
    # beta's consumer may call models but not read the audit.
    consumer = moderated.platform.key
    assert get(moderated, "/api/moderation/decisions", key=consumer).status_code == 403
    bad = get(moderated, "/api/moderation/decisions", cursor="nonsense")
    assert bad.status_code == 400 and bad.json()["code"] == "invalid_cursor"
    # The platform admin names the tenant.
    admin = moderated.platform.client
    assert len(admin.get("/api/moderation/decisions?tenant=beta").json()["items"]) == 5
    assert admin.get("/api/moderation/decisions?tenant=gamma").json()["items"] == []


def test_the_admin_must_name_the_tenant(moderated: World) -> None:
    answer = moderated.platform.client.get("/api/moderation/decisions")
    assert answer.status_code == 400 and answer.json()["code"] == "tenant_required"
