"""The adversarial world: a victim tenant with one of every resource, an attacker tenant
with a principal of every kind, and the rule for spotting a leak.

Everything the victim (``acme``) owns is named with the marker ``zqv`` (its models,
endpoint, backend, alias, members, display name), so a response that mentions a
``zqv`` name the request did not itself contain has leaked it. Ids that cannot carry a
marker (key ids, blob digests, prediction ids) are checked the same way.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
from starlette.testclient import TestClient

from modelport.app import Services
from modelport.registry import repository as registry_repo
from modelport.registry.types import LifecycleState
from modelport.tenancy.policy import ALL_PERMISSIONS, Permission
from tests.conftest import ADMIN_KEY
from tests.registry.helpers import put_blob
from tests.serving.conftest import ROW, X, Y, add_constant

ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}
VICTIM = "acme"
ATTACKER = "globex"
BYSTANDER = "initech"
"""A third tenant the victim shares its model with (so the victim has a grant)."""
MODEL = "zqv-model"
PUBLIC_MODEL = "open-model"
"""Public: anyone may read it, and call its approved versions (not its candidates)."""
ENDPOINT = "zqv-endpoint"
BACKEND = "zqv-backend"
BACKEND_HOSTS = ("zqv-backend.invalid", "backend.invalid", "x")
"""``backend_allow_hosts`` of the world: names its backends are declared at (never
called)."""
ALIAS = "zqv-alias"
VICTIM_NAME = "Zqv Victim Corp"
VICTIM_ROLES = ("owner", "publisher", "deployer", "consumer", "billing")
ATTACKER_MODEL = "bmodel"
ATTACKER_ENDPOINT = "b-endpoint"
INFER = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": ROW[0]}]}
SIZES: dict[str, int] = {}
"""Blob sizes by digest, for manifests that name a seeded blob."""
_MARKED = re.compile(r"zqv[A-Za-z0-9_.\-]*", re.IGNORECASE)

ROLES = ("owner", "publisher", "approver", "deployer", "consumer", "billing")
SCOPED_ADMIN = "admin-scoped"
"""A member the platform admin made ``admin``, with a key scoped to everything but
``platform.manage``: an ordinary member of its own tenant (docs/tenancy.md)."""
SERVICE_ACCOUNT = "service-account"
"""A service account holding ``owner``, its key scoped to calling, reading and reporting."""
SA_SCOPES = ["model.read", "model.call", "usage.report", "keys.self", "tenant.read"]
NO_SCOPES = "no-scopes"
"""An owner's key made with an empty scope list: it may do nothing."""
REVOKED = "revoked"
ANONYMOUS = "anonymous"
ATTACKERS = (*ROLES, SCOPED_ADMIN, SERVICE_ACCOUNT, NO_SCOPES, REVOKED, ANONYMOUS)

ATTACKER_PERMISSIONS: dict[str, frozenset[str]] = {
    role: frozenset() for role in (NO_SCOPES, REVOKED, ANONYMOUS)
}
ATTACKER_PERMISSIONS[SCOPED_ADMIN] = frozenset(
    p.value for p in ALL_PERMISSIONS if p is not Permission.PLATFORM_MANAGE
)
ATTACKER_PERMISSIONS[SERVICE_ACCOUNT] = frozenset(SA_SCOPES)


def holders(permission: str) -> frozenset[str]:
    """The attackers whose credential holds ``permission``."""
    from modelport.tenancy.policy import ROLE_PERMISSIONS

    found = {r for r in ROLES if permission in {p.value for p in ROLE_PERMISSIONS[r]}}
    found |= {a for a, held in ATTACKER_PERMISSIONS.items() if permission in held}
    return frozenset(found)


@dataclass
class World:
    client: TestClient
    services: Services
    ids: dict[str, str] = field(default_factory=dict)
    """The victim's ids by name: ``key``, ``grant``, ``invoice``, ``statement``, ..."""
    victim_keys: dict[str, str] = field(default_factory=dict)
    attacker_keys: dict[str, str] = field(default_factory=dict)
    secrets: set[str] = field(default_factory=set)
    """Unmarked victim values that must never reach the attacker (ids, digests)."""
    estate: dict[str, Any] = field(default_factory=dict)
    """The victim's resources as the admin read them before any attack."""

    def victim(self, role: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.victim_keys[role]}"}

    def attacker(self, who: str) -> dict[str, str]:
        if who == ANONYMOUS:
            return {}
        return {"Authorization": f"Bearer {self.attacker_keys[who]}"}

    def leaks(self, response: httpx.Response, request_text: str) -> list[str]:
        """The victim's names and ids in ``response`` that the request did not carry."""
        body = response.text + " ".join(f"{k}: {v}" for k, v in response.headers.items())
        found = {m for m in _MARKED.findall(body) if m.lower() not in request_text.lower()}
        found |= {s for s in self.secrets if s in body and s not in request_text}
        return sorted(found)


def _ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json() if response.content else None


def _force_state(services: Services, owner: str, name: str, version: str, *states: str) -> None:
    with services.database.transaction() as session:
        vid = registry_repo.version_id(session, owner, name, version, lock=True)
        for state in states:
            current = registry_repo.current_state(session, vid)
            registry_repo.append_event(
                session, vid, current, LifecycleState(state), actor="seed", reason="seed"
            )


def publish(services: Services, owner: str, name: str, version: str, plus: float) -> str:
    """Publish an add-constant ONNX version; its blob's digest (``size:`` recorded too)."""
    data = add_constant(plus, name=f"{owner}-{name}-{version}").SerializeToString()
    digest = put_blob(services.blob_store, data)
    manifest = {
        "format": "onnx",
        "files": [{"path": "model.onnx", "digest": digest, "size": len(data)}],
        "inputs": X,
        "outputs": Y,
        "license": "MIT",
        "examples": [],
    }
    services.registry.publish(owner, name, version, manifest, actor=f"{owner}/seed")
    SIZES[digest] = len(data)
    return digest


def _wait_active(client: TestClient, endpoint: str, ident: int, headers: dict[str, str]) -> None:
    deadline = time.monotonic() + 30
    while True:
        body = _ok(client.get(f"/api/endpoints/{endpoint}/deployments/{ident}", headers=headers))
        if body["state"] != "pending":
            assert body["state"] == "active", body
            return
        assert time.monotonic() < deadline, body
        time.sleep(0.02)


def seed(client: TestClient, services: Services) -> World:
    """Build the victim's estate through its own principals, and the attacker's keys."""
    world = World(client, services)
    tenancy, registry = services.tenancy, services.registry
    tenancy.create_tenant(VICTIM, actor="admin", name=VICTIM_NAME)
    for role in VICTIM_ROLES:
        tenancy.add_member(VICTIM, f"zqv-{role}", roles=[role], actor="admin")
        issued = tenancy.create_key(VICTIM, f"zqv-{role}", name="zqv-key", actor="admin")
        world.victim_keys[role] = issued.secret
        world.ids[f"key-{role}"] = issued.key.id
        world.secrets.add(issued.key.id)
    tenancy.create_tenant(BYSTANDER, actor="admin", name="Initech")
    tenancy.create_tenant(ATTACKER, actor="admin", name="Globex")
    _seed_attackers(world)

    # The victim's private model: version 1 approved (and deployed), 2 a candidate.
    registry.create_model(VICTIM, MODEL, actor="acme/zqv-publisher", license="MIT")
    for version, plus in (("1", 1.0), ("2", 2.0)):
        digest = publish(services, VICTIM, MODEL, version, plus)
        world.ids[f"digest-{version}"] = digest
        world.secrets.add(digest.removeprefix("sha256:"))
    _force_state(services, VICTIM, MODEL, "1", "validated", "approved")
    registry.set_alias(VICTIM, MODEL, ALIAS, "1", actor="acme/zqv-deployer")
    registry.create_model(
        VICTIM, PUBLIC_MODEL, actor="acme/seed", license="MIT", visibility="public"
    )
    for version, plus in (("1", 3.0), ("2", 4.0)):
        publish(services, VICTIM, PUBLIC_MODEL, version, plus)
    _force_state(services, VICTIM, PUBLIC_MODEL, "1", "validated", "approved")
    # The attacker's own model, to aim its usage reports and deployments with.
    registry.create_model(ATTACKER, ATTACKER_MODEL, actor="globex/owner", license="MIT")
    publish(services, ATTACKER, ATTACKER_MODEL, "1", 5.0)
    _force_state(services, ATTACKER, ATTACKER_MODEL, "1", "validated", "approved")
    _ok(
        client.post(
            "/api/endpoints", json={"name": ATTACKER_ENDPOINT}, headers=world.attacker("owner")
        ),
        201,
    )

    owner, deployer = world.victim("owner"), world.victim("deployer")
    price = {"model": f"{VICTIM}/{MODEL}", "unit": "prediction", "unit_price_micros": 1000}
    _ok(client.post("/api/prices", json=price, headers=owner), 201)
    endpoint = {"name": ENDPOINT, "log": {"inputs": True, "outputs": True}}
    _ok(client.post("/api/endpoints", json=endpoint, headers=deployer), 201)
    spec = {"versions": [{"model": f"{VICTIM}/{MODEL}", "version": "1", "weight": 100}]}
    deployment = _ok(
        client.post(f"/api/endpoints/{ENDPOINT}/deployments", json=spec, headers=deployer), 202
    )
    world.ids["deployment"] = str(deployment["id"])
    _wait_active(client, ENDPOINT, deployment["id"], deployer)
    backend = {"name": BACKEND, "kind": "remote_v2", "url": "http://zqv-backend.invalid:8000"}
    _ok(client.post("/api/backends", json=backend, headers=deployer), 201)
    grant = {"grantee": BYSTANDER, "model": MODEL}
    world.ids["grant"] = str(_ok(client.post("/api/grants", json=grant, headers=owner), 201)["id"])

    # Calls: a prediction through the endpoint (logged), one over /v2.
    consumer = world.victim("consumer")
    predicted = _ok(client.post(f"/api/endpoints/{ENDPOINT}:predict", json=INFER, headers=consumer))
    world.ids["prediction"] = predicted["prediction_id"]
    world.secrets.add(predicted["prediction_id"])
    _ok(client.post(f"/v2/models/{VICTIM}/{MODEL}/infer", json=INFER, headers=consumer))

    # Limits, budget, balance.
    _ok(client.put(f"/api/limits/tenant/{VICTIM}", json={"rpm": 100_000}, headers=owner))
    key = world.ids["key-consumer"]
    _ok(client.put(f"/api/limits/key/{key}", json={"rpm": 50_000}, headers=owner))
    _ok(client.put(f"/api/limits/model/{VICTIM}/{MODEL}", json={"rpm": 70_000}, headers=owner))
    budget = {"hard_cap_micros": 10**12, "soft_cap_micros": 1}
    _ok(client.put(f"/api/budgets/{VICTIM}", json=budget, headers=owner))
    credit = {"amount_micros": 5_000_000, "reason": "zqv prepaid"}
    _ok(client.post(f"/api/balances/{VICTIM}/credits", json=credit, headers=ADMIN), 201)
    # One more call after the budget, then bill the period.
    _ok(client.post(f"/api/endpoints/{ENDPOINT}:predict", json=INFER, headers=consumer))
    services.metering.deliver()
    period = time.strftime("%Y-%m", time.gmtime())
    _ok(client.post("/api/billing/generate", json={"period": period}, headers=ADMIN))
    invoices = _ok(client.get("/api/invoices", params={"tenant": VICTIM}, headers=ADMIN))
    statements = _ok(client.get("/api/statements", params={"publisher": VICTIM}, headers=ADMIN))
    assert invoices["items"] and statements["items"], (invoices, statements)
    world.ids["invoice"] = str(invoices["items"][0]["id"])
    world.ids["statement"] = str(statements["items"][0]["id"])
    assert _ok(client.get(f"/api/predictions/{world.ids['prediction']}", headers=owner))
    return world


def _seed_attackers(world: World) -> None:
    tenancy = world.services.tenancy
    for role in ROLES:
        tenancy.add_member(ATTACKER, role, roles=[role], actor="admin")
        world.attacker_keys[role] = tenancy.create_key(
            ATTACKER, role, name="attack", actor="admin"
        ).secret
    tenancy.add_member(ATTACKER, SCOPED_ADMIN, roles=["admin"], actor="admin")
    world.attacker_keys[SCOPED_ADMIN] = tenancy.create_key(
        ATTACKER,
        SCOPED_ADMIN,
        name="attack",
        actor="admin",
        scopes=sorted(ATTACKER_PERMISSIONS[SCOPED_ADMIN]),
    ).secret
    tenancy.add_member(
        ATTACKER, SERVICE_ACCOUNT, roles=["owner"], kind="service_account", actor="admin"
    )
    world.attacker_keys[SERVICE_ACCOUNT] = tenancy.create_key(
        ATTACKER, SERVICE_ACCOUNT, name="attack", actor="admin", scopes=SA_SCOPES
    ).secret
    world.attacker_keys[NO_SCOPES] = tenancy.create_key(
        ATTACKER, "owner", name="no-scopes", actor="admin", scopes=[]
    ).secret
    revoked = tenancy.create_key(ATTACKER, "owner", name="revoked", actor="admin")
    tenancy.revoke_key(revoked.key.id)
    world.attacker_keys[REVOKED] = revoked.secret
