"""The audit log: who, tenant, action, target, reason, request id, time, outcome."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from tests.tenancy.conftest import ADMIN, World


def audit(world: World, headers: dict[str, str], **params: Any) -> list[dict[str, Any]]:
    response = world.client.get("/api/audit", params=params, headers=headers)
    assert response.status_code == 200, response.text
    return response.json()["items"]


def test_mutations_are_recorded_with_their_context(world: World) -> None:
    owner = world.key("acme", "owner")
    response = world.client.post(
        "/api/models/acme/private/versions/1/transitions",
        json={"to": "rejected", "reason": "leaks PII"},
        headers=owner | {"X-Request-Id": "req-123"},
    )
    assert response.status_code == 201
    assert response.headers["x-request-id"] == "req-123"
    [event] = audit(world, owner, action="versions.transition")
    assert event["actor"] == "acme/owner" and event["actor_tenant"] == "acme"
    assert event["key_id"] == world.keys["acme", "owner"].split("_")[2]
    assert event["tenant"] == "acme" and event["method"] == "POST"
    assert event["target"] == "/api/models/acme/private/versions/1/transitions"
    assert event["reason"] == "leaks PII" and event["request_id"] == "req-123"
    assert event["outcome"] == "success" and event["status"] == 201
    at = datetime.fromisoformat(event["at"])
    assert abs(at - datetime.now(UTC)) < timedelta(minutes=1)


def test_denials_and_failures_are_recorded_too(world: World) -> None:
    consumer = world.key("acme", "consumer")
    denied = world.client.post("/api/models", json={"owner": "acme", "name": "n"}, headers=consumer)
    assert denied.status_code == 403
    conflict = world.client.post(
        "/api/models", json={"owner": "acme", "name": "private"}, headers=world.key("acme", "owner")
    )
    assert conflict.status_code == 409
    # A denied read is recorded as well; a successful read is not.
    assert world.client.get("/api/audit", headers=consumer).status_code == 403
    events = audit(world, world.key("acme", "owner"))
    outcomes = [(e["actor"], e["action"], e["outcome"], e["status"]) for e in events]
    assert ("acme/consumer", "models.create_model", "denied", 403) in outcomes
    assert ("acme/owner", "models.create_model", "failed", 409) in outcomes
    assert ("acme/consumer", "audit.audit_log", "denied", 403) in outcomes
    assert not any(e["method"] == "GET" and e["status"] == 200 for e in events)
    # Cross-tenant attempts show in both tenants' logs.
    world.client.post(
        "/api/models/acme/private/versions/1/transitions",
        json={"to": "rejected"},
        headers=world.key("globex", "owner"),
    )
    for tenant in ("acme", "globex"):
        events = audit(world, world.key(tenant, "owner"), actor="globex/owner")
        assert [e["status"] for e in events] == [404]


def test_unauthenticated_requests_and_inference_are_not_recorded(world: World) -> None:
    world.client.post("/api/models", json={"owner": "acme", "name": "n"})
    world.client.post(
        "/v2/models/acme/private/versions/1/infer",
        json={"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1, 2, 3, 4]}]},
        headers=world.key("acme", "consumer"),
    )
    assert audit(world, ADMIN) == []


def test_filters_and_cursor_pagination(world: World) -> None:
    owner = world.key("acme", "owner")
    for i in range(5):
        world.client.post("/api/models", json={"owner": "acme", "name": f"m{i}"}, headers=owner)
    world.client.post(
        "/api/models", json={"owner": "acme", "name": "x"}, headers=world.key("acme", "consumer")
    )
    everything = audit(world, ADMIN)
    assert len(everything) == 6
    ids = [e["id"] for e in everything]
    assert ids == sorted(ids, reverse=True)  # newest first
    seen: list[int] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": 2} | ({"cursor": cursor} if cursor else {})
        page = world.client.get("/api/audit", params=params, headers=ADMIN).json()
        seen += [e["id"] for e in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == ids
    assert len(audit(world, ADMIN, outcome="denied")) == 1
    assert len(audit(world, ADMIN, actor="acme/owner")) == 5
    assert len(audit(world, ADMIN, action="models.create_model", tenant="acme")) == 6
    assert audit(world, ADMIN, tenant="globex") == []
    future = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    assert audit(world, ADMIN, since=future) == []
    assert len(audit(world, ADMIN, until=future)) == 6
    naive = (datetime.now(UTC) + timedelta(hours=1)).replace(tzinfo=None).isoformat()
    assert audit(world, ADMIN, since=naive) == []
    for params in ({"cursor": "nope"}, {"outcome": "maybe"}, {"limit": 0}):
        response = world.client.get("/api/audit", params=params, headers=ADMIN)
        assert response.status_code == 400, (params, response.text)


def test_the_log_is_append_only(world: World) -> None:
    world.client.post("/api/tenants", json={"slug": "initech"}, headers=ADMIN)
    assert audit(world, ADMIN)
    for statement in ("UPDATE audit_events SET actor = 'nobody'", "DELETE FROM audit_events"):
        with (
            pytest.raises(DBAPIError, match="append-only"),
            world.services.database.transaction() as session,
        ):
            session.execute(text(statement))
    assert audit(world, ADMIN)[0]["actor"] == "admin"


def test_request_ids_are_made_when_missing_or_malformed(world: World) -> None:
    made = world.client.get("/healthz").headers["x-request-id"]
    assert len(made) == 32
    for bad in (b"", b"x" * 200, b"a b", "é".encode()):
        got = world.client.get("/healthz", headers={"X-Request-Id": bad}).headers["x-request-id"]
        assert got.encode() != bad and len(got) == 32
    kept = world.client.get("/healthz", headers={"X-Request-Id": "trace-1:ab/cd"})
    assert kept.headers["x-request-id"] == "trace-1:ab/cd"
