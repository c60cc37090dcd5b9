"""The attacker's own audit log must not tell a hidden resource from a missing one.

Every refused mutation is audited, with the tenant the target belongs to, and a
tenant's owners read the events by its principals. So an attempt on another tenant's
endpoint, key, backend, grant, invoice or prediction must read, in the attacker's log,
exactly as the same attempt on one that does not exist; the victim's owners still see
the attempt on their resource, naming their tenant.
"""

from __future__ import annotations

from typing import Any

from tests.security.attacks import GHOST_IDS, deploy, fill, hidden_ids
from tests.security.world import ADMIN, ATTACKER, ATTACKER_MODEL, VICTIM, World

DEPLOY = deploy(f"{ATTACKER}/{ATTACKER_MODEL}")
ATTEMPTS: list[tuple[str, str, Any]] = [
    ("POST", "/api/endpoints/{endpoint}/deployments", DEPLOY),
    ("POST", "/api/endpoints/{endpoint}/deployments/{deployment}:rollback", None),
    ("POST", "/api/keys/{key}/rotate", None),
    ("DELETE", "/api/keys/{key}", None),
    ("PUT", "/api/limits/key/{key}", {"rpm": 1}),
    ("DELETE", "/api/backends/{backend}", None),
    ("DELETE", "/api/grants/{grant}", None),
    ("POST", "/api/invoices/{invoice}/finalize", None),
    ("POST", "/api/statements/{statement}/finalize", None),
    ("POST", "/api/predictions/{prediction}/outcome", {"label": 1}),
    ("PUT", "/api/models/acme/{model}/aliases/{alias}", {"version": "2"}),
    ("PATCH", "/api/tenants/{tenant}", {"name": "x"}),
    ("PUT", "/api/budgets/{tenant}", {"hard_cap_micros": 0}),
]
SAME = ("action", "method", "tenant", "outcome", "status", "reason", "actor", "actor_tenant")


def test_the_attackers_audit_log_is_no_oracle(world: World) -> None:
    attacker = world.attacker("owner")
    hidden = hidden_ids(world)
    for method, template, body in ATTEMPTS:
        for ids in (hidden, GHOST_IDS):
            response = world.client.request(
                method, fill(template, ids), json=fill(body, ids), headers=attacker
            )
            assert response.status_code == 404, (template, response.text)
    log = world.client.get("/api/audit", params={"limit": 200}, headers=attacker)
    assert log.status_code == 200, log.text
    # This test's own attempts (the module's other tests may have tried a target too).
    mine = f"{ATTACKER}/owner"
    events = {e["target"]: e for e in log.json()["items"] if e["actor"] == mine}
    for _, template, _ in ATTEMPTS:
        seen = events[fill(template, hidden)]
        missing = events[fill(template, GHOST_IDS)]
        assert {k: seen[k] for k in SAME} == {k: missing[k] for k in SAME}, template
    # Only the attacker's own doings (and what is about its tenant) are in its log.
    for event in log.json()["items"]:
        assert ATTACKER in (event["actor_tenant"], event["tenant"]), event
    assert world.leaks(log, " ".join(events)) == []


def test_the_victims_owners_see_the_attempts_on_their_resources(world: World) -> None:
    endpoint = fill("/api/endpoints/{endpoint}/deployments", hidden_ids(world))
    world.client.post(endpoint, json=DEPLOY, headers=world.attacker("deployer"))
    for headers in (world.victim("owner"), ADMIN):
        log = world.client.get(
            "/api/audit", params={"tenant": VICTIM, "actor": "globex/deployer"}, headers=headers
        )
        assert log.status_code == 200, log.text
        attempts = [e for e in log.json()["items"] if e["target"] == endpoint]
        assert attempts and all(e["tenant"] == VICTIM for e in attempts), log.text
        assert attempts[0]["outcome"] == "failed" and attempts[0]["status"] == 404
