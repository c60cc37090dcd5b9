"""The attack table: for each kind of the victim's resources, every operation another
tenant might try on it (read, list, call, download, modify, delete, bill).

Paths and bodies name the victim's things by placeholder (``{model}``, ``{key}``...);
``HIDDEN`` fills them with the real ones, ``GHOST`` with ones that do not exist, so a
refusal can be compared with the answer a missing resource gets.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from tests.security.world import (
    ADMIN,
    ALIAS,
    ANONYMOUS,
    ATTACKER_ENDPOINT,
    ATTACKER_MODEL,
    BACKEND,
    ENDPOINT,
    INFER,
    MODEL,
    PUBLIC_MODEL,
    REVOKED,
    World,
    holders,
)

GHOST_IDS = {
    "model": "gh0st-model",
    "endpoint": "gh0st-endpoint",
    "backend": "gh0st-backend",
    "alias": "gh0st-alias",
    "tenant": "gh0st",
    "key": "0" * 16,
    "grant": "987654321",
    "invoice": "987654321",
    "statement": "987654321",
    "prediction": "f" * 32,
    "deployment": "987654321",
    "digest": "sha256:" + "0" * 64,
}


def hidden_ids(world: World) -> dict[str, str]:
    return {
        "model": MODEL,
        "endpoint": ENDPOINT,
        "backend": BACKEND,
        "alias": ALIAS,
        "tenant": "acme",
        "key": world.ids["key-consumer"],
        "grant": world.ids["grant"],
        "invoice": world.ids["invoice"],
        "statement": world.ids["statement"],
        "prediction": world.ids["prediction"],
        "deployment": world.ids["deployment"],
        "digest": world.ids["digest-1"],
    }


def fill(value: Any, ids: dict[str, str]) -> Any:
    """``value`` with every ``{name}`` placeholder in its strings replaced."""
    if isinstance(value, str):
        for name, real in ids.items():
            value = value.replace("{" + name + "}", real)
        return value
    if isinstance(value, dict):
        return {k: fill(v, ids) for k, v in value.items()}
    if isinstance(value, list):
        return [fill(v, ids) for v in value]
    return value


VOLATILE = frozenset({"traffic", "phases", "health", "breaker", "latency_ms"})
"""Fields that move by themselves (probes, the traffic window): not part of a resource."""


def stable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: stable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [stable(v) for v in value]
    return value


def admin_view(world: World, paths: tuple[str, ...], ids: dict[str, str]) -> dict[str, Any]:
    view = {}
    for template in paths:
        response = world.client.get(fill(template, ids), headers=ADMIN)
        assert response.status_code == 200, (template, response.text)
        view[template] = (
            stable(response.json())
            if "json" in response.headers.get("content-type", "")
            else response.text
        )
    return view


REFUSED = (401, 403, 404)
NOBODY: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Op:
    kind: str
    action: str
    method: str
    path: str
    body: Any = None
    refused: bool = True
    """False: answered to the attacker (a list of its own things) but must not leak."""
    ghost: bool = True
    """Compare with the same request on a resource that does not exist (same answer)."""
    allowed: frozenset[str] = NOBODY
    """Attackers for whom this is allowed by design (docs/tenancy.md)."""
    also: tuple[int, ...] = ()
    """Statuses besides 401/403/404 that are a refusal here (e.g. 400 ``unknown_backend``)."""
    witness: tuple[str, ...] = ()
    """Victim paths whose admin view must not change."""

    @property
    def id(self) -> str:
        return f"{self.kind}-{self.action}-{self.method}-{self.path}"

    def request_text(self, ids: dict[str, str]) -> str:
        return f"{self.method} {fill(self.path, ids)} {json.dumps(fill(self.body, ids))}"


V = "/api/models/acme/{model}"
V1 = V + "/versions/1"
MODEL_W = (
    V + "/versions",
    V1 + "/events",
    V + "/versions/2/events",
    V + "/aliases",
    V1 + "/signatures",
    "/api/prices?model=acme/{model}",
    "/api/limits?tenant=acme",
)
ENDPOINT_W = ("/api/endpoints/{endpoint}", "/api/endpoints/{endpoint}/deployments")
BACKEND_W = ("/api/backends?tenant=acme",)
GRANT_W = ("/api/grants?tenant=acme",)
KEY_W = ("/api/keys?tenant=acme", "/api/limits?tenant=acme")
TENANT_W = (
    "/api/tenants/acme",
    "/api/tenants/acme/members",
    "/api/limits?tenant=acme",
    "/api/budgets/acme",
)
MONEY_W = (
    "/api/usage?tenant=acme",
    "/api/invoices/{invoice}",
    "/api/statements/{statement}",
    "/api/balances/acme",
    "/api/budgets/acme",
)
REGISTER = holders("model.register")
REPORT = holders("usage.report")
DEPLOY = holders("version.deploy")
B_MANIFEST = {
    "format": "onnx",
    "files": [{"path": "model.onnx", "digest": "{digest}", "size": 1}],
    "inputs": [{"name": "x", "datatype": "FP32", "shape": [-1, 4]}],
    "outputs": [{"name": "y", "datatype": "FP32", "shape": [-1, 4]}],
    "license": "MIT",
}


def usage_event(event_id: str, tenant: str, model: str) -> dict[str, Any]:
    return {
        "event_id": event_id,
        "tenant": tenant,
        "model": model,
        "version": "1",
        "unit": "prediction",
        "quantity": 1000,
        "started_at": "2099-01-01T00:00:00+00:00",
        "finished_at": "2099-01-01T00:00:01+00:00",
    }


def deploy(model: str, backends: list[str] | None = None, version: str = "1") -> dict[str, Any]:
    wanted: dict[str, Any] = {"model": model, "version": version, "weight": 100}
    if backends:
        wanted["backends"] = backends
    return {"versions": [wanted]}


ESTATE = (
    *MODEL_W,
    V + "/aliases/{alias}",
    *ENDPOINT_W,
    "/api/endpoints?tenant=acme",
    *BACKEND_W,
    *GRANT_W,
    *KEY_W,
    *TENANT_W,
    *MONEY_W,
    "/api/predictions/{prediction}",
)
"""Everything the victim has, as the admin reads it: its money included."""


def _ops() -> list[Op]:
    ops: list[Op] = []

    def add(kind: str, action: str, method: str, path: str, body: Any = None, **kw: Any) -> None:
        ops.append(Op(kind, action, method, path, body, **kw))

    # ---- the private model, its versions, aliases, prices, limits
    for path in (
        V,
        V + "/versions",
        V1,
        V1 + "/events",
        V1 + "/validation",
        V1 + "/signatures",
        V1 + "/lineage",
        V1 + "/prediction-log",
        V + "/aliases",
        V + "/aliases/{alias}",
        V + "/aliases/{alias}/history",
        "/api/prices?model=acme/{model}",
        "/api/limits/model/acme/{model}",
        "/v2/models/acme/{model}",
        "/v2/models/acme/{model}/versions/1",
        "/v2/models/acme/{model}/ready",
        "/v2/models/acme/{model}/versions/1/ready",
    ):
        add("model", "read", "GET", path)
    add("model", "list", "GET", "/api/models", refused=False, ghost=False)
    add("model", "list", "GET", "/api/models?owner=acme", refused=False, ghost=False)
    add("model", "list", "POST", "/v2/repository/index", {}, refused=False, ghost=False)
    add(
        "model", "list", "POST", "/v2/repository/index", {"ready": True}, refused=False, ghost=False
    )
    add("model", "call", "POST", "/v2/models/acme/{model}/infer", INFER)
    add("model", "call", "POST", "/v2/models/acme/{model}/versions/1/infer", INFER)
    add(
        "model",
        "call",
        "POST",
        f"/api/endpoints/{ATTACKER_ENDPOINT}/deployments",
        deploy("acme/{model}"),
        witness=ENDPOINT_W,
    )
    # The victim's public model: readable, but its candidate is not callable across tenants.
    add(
        "model",
        "call",
        "POST",
        f"/v2/models/acme/{PUBLIC_MODEL}/versions/2/infer",
        INFER,
        ghost=False,
        witness=MONEY_W,
    )
    add(
        "model",
        "call",
        "POST",
        f"/api/endpoints/{ATTACKER_ENDPOINT}/deployments",
        deploy(f"acme/{PUBLIC_MODEL}", version="2"),
        ghost=False,
        also=(409,),
        witness=ENDPOINT_W,
    )
    add(
        "model",
        "call",
        "POST",
        "/api/endpoints",
        {
            "name": "mole-fallback",
            "fallback": {"steps": [{"kind": "version", "model": "acme/{model}", "version": "1"}]},
        },
        witness=ENDPOINT_W,
    )
    add("model", "download", "GET", "/api/blobs/{digest}")
    add("model", "download", "HEAD", "/api/blobs/{digest}")
    modify: list[tuple[str, str, Any]] = [
        ("POST", V + "/versions", {"version": "9", "manifest": B_MANIFEST}),
        ("POST", V + "/versions/2/transitions", {"to": "approved"}),
        ("POST", V + "/versions/2/transitions", {"to": "rejected"}),
        ("POST", V1 + "/transitions", {"to": "deprecated"}),
        ("POST", V1 + "/signatures", {"public_key": "AAAA", "signature": "AAAA", "signer": "x"}),
        ("PUT", V + "/aliases/{alias}", {"version": "2"}),
        ("POST", "/api/models", {"owner": "acme", "name": "{model}"}),
        ("POST", "/api/prices", {"model": "acme/{model}", "unit": "prediction",
                                 "unit_price_micros": 0}),
        ("PUT", "/api/limits/model/acme/{model}", {"rpm": 1}),
        ("POST", "/v2/repository/models/acme/{model}/load", {}),
        ("POST", "/v2/repository/models/acme/{model}/unload", {}),
        ("POST", "/api/grants", {"namespace": "acme", "grantee": "globex", "model": "{model}"}),
    ]  # fmt: skip
    for method, path, body in modify:
        add("model", "modify", method, path, body, witness=MODEL_W)
    sampled = V1 + "/prediction-log"
    sampling = {"rate": 1, "payloads": True}
    add("model", "modify", "PUT", sampled, sampling, witness=(*MODEL_W, sampled))
    add("model", "delete", "DELETE", V + "/aliases/{alias}", witness=MODEL_W)
    add("model", "delete", "DELETE", "/api/limits/model/acme/{model}", witness=MODEL_W)
    # ---- the endpoint, its deployments, its prediction log
    for path in (
        "/api/endpoints/{endpoint}",
        "/api/endpoints/{endpoint}/deployments",
        "/api/endpoints/{endpoint}/deployments/{deployment}",
        "/api/endpoints/{endpoint}/outcomes",
        "/api/endpoints/{endpoint}/slos",
        "/api/endpoints/{endpoint}/slos/status",
        "/api/endpoints/{endpoint}/monitoring",
        "/api/predictions/{prediction}",
    ):
        add("endpoint", "read", "GET", path)
    add(
        "endpoint",
        "modify",
        "PUT",
        "/api/endpoints/{endpoint}/slos",
        {"slos": [{"name": "mole", "kind": "availability", "objective": 0.5}]},
        witness=("/api/endpoints/{endpoint}/slos",),
    )
    add("endpoint", "list", "GET", "/api/endpoints", refused=False, ghost=False)
    add("endpoint", "list", "GET", "/api/endpoints?tenant=acme", refused=False, ghost=False)
    add("endpoint", "call", "POST", "/api/endpoints/{endpoint}:predict", INFER, witness=MONEY_W)
    add(
        "endpoint",
        "modify",
        "POST",
        "/api/endpoints/{endpoint}/deployments",
        deploy(f"globex/{ATTACKER_MODEL}"),
        witness=ENDPOINT_W,
    )
    add(
        "endpoint",
        "modify",
        "POST",
        "/api/endpoints/{endpoint}/deployments/{deployment}:rollback",
        witness=ENDPOINT_W,
    )
    add(
        "endpoint",
        "modify",
        "POST",
        "/api/endpoints",
        {"name": "mole-endpoint", "tenant": "{tenant}"},
        witness=("/api/endpoints?tenant=acme",),
    )
    add(
        "endpoint",
        "modify",
        "POST",
        "/api/predictions/{prediction}/outcome",
        {"label": 1},
        witness=("/api/predictions/{prediction}",),
    )

    # ---- the remote backend
    add("backend", "read", "GET", "/api/backends/{backend}")
    add("backend", "list", "GET", "/api/backends", refused=False, ghost=False)
    add("backend", "list", "GET", "/api/backends?tenant=acme", refused=False, ghost=False)
    add(
        "backend",
        "call",
        "POST",
        f"/api/endpoints/{ATTACKER_ENDPOINT}/deployments",
        deploy(f"globex/{ATTACKER_MODEL}", ["{backend}"]),
        also=(400,),
        witness=BACKEND_W,
    )
    add(
        "backend",
        "modify",
        "POST",
        "/api/backends",
        {"name": "mole-backend", "tenant": "{tenant}", "kind": "remote_v2", "url": "http://x"},
        witness=BACKEND_W,
    )
    add("backend", "delete", "DELETE", "/api/backends/{backend}", witness=BACKEND_W)

    # ---- grants the victim gave
    add("grant", "read", "GET", "/api/grants/{grant}")
    add("grant", "list", "GET", "/api/grants", refused=False, ghost=False)
    add("grant", "list", "GET", "/api/grants?tenant={tenant}")
    add("grant", "delete", "DELETE", "/api/grants/{grant}", witness=GRANT_W)
    add(
        "grant",
        "modify",
        "POST",
        "/api/grants",
        {"namespace": "{tenant}", "grantee": "globex"},
        witness=GRANT_W,
    )

    # ---- the victim's API keys
    add("key", "read", "GET", "/api/keys/{key}")
    add("key", "read", "GET", "/api/limits/key/{key}")
    add("key", "list", "GET", "/api/keys", refused=False, ghost=False)
    add("key", "list", "GET", "/api/keys?tenant={tenant}")
    add("key", "modify", "POST", "/api/keys/{key}/rotate", witness=KEY_W)
    add(
        "key",
        "modify",
        "POST",
        "/api/keys",
        {"name": "mole", "tenant": "{tenant}", "member": "zqv-owner"},
        witness=KEY_W,
    )
    add("key", "modify", "PUT", "/api/limits/key/{key}", {"rpm": 1}, witness=KEY_W)
    add("key", "delete", "DELETE", "/api/keys/{key}", witness=KEY_W)
    add("key", "delete", "DELETE", "/api/limits/key/{key}", witness=KEY_W)

    # ---- the tenant: settings, members, limits, budget, balance, audit
    for path in (
        "/api/tenants/{tenant}",
        "/api/tenants/{tenant}/members",
        "/api/tenants/{tenant}/members/zqv-owner",
        "/api/limits/tenant/{tenant}",
        "/api/limits?tenant={tenant}",
        "/api/budgets/{tenant}",
        "/api/budgets/{tenant}/alerts",
        "/api/balances/{tenant}",
        "/api/audit?tenant={tenant}",
        "/api/tenants/{tenant}/retention",
        "/api/tenants/{tenant}/prediction-log",
        "/api/tenants/{tenant}/costs",
    ):
        add("tenant", "read", "GET", path)
    add("tenant", "list", "GET", "/api/tenants", refused=False, ghost=False)
    add("tenant", "list", "GET", "/api/limits", refused=False, ghost=False)
    tenant_writes: list[tuple[str, str, Any]] = [
        ("PATCH", "/api/tenants/{tenant}", {"name": "pwned", "require_separation": True}),
        ("POST", "/api/tenants/{tenant}/members", {"name": "mole", "roles": ["owner"]}),
        ("PATCH", "/api/tenants/{tenant}/members/zqv-consumer", {"roles": ["owner"]}),
        ("DELETE", "/api/tenants/{tenant}/members/zqv-consumer", None),
        ("PUT", "/api/limits/tenant/{tenant}", {"rpm": 1}),
        ("DELETE", "/api/limits/tenant/{tenant}", None),
        ("PUT", "/api/budgets/{tenant}", {"hard_cap_micros": 0}),
        ("DELETE", "/api/budgets/{tenant}", None),
        ("POST", "/api/balances/{tenant}/credits", {"amount_micros": 1}),
    ]
    for method, path, body in tenant_writes:
        action = "delete" if method == "DELETE" else "modify"
        add("tenant", action, method, path, body, witness=TENANT_W + MONEY_W)
    # the prediction log's retention, and the right to deletion of the tenant's records
    retention_w = ("/api/tenants/{tenant}/retention", "/api/predictions/{prediction}")
    add(
        "tenant",
        "modify",
        "PUT",
        "/api/tenants/{tenant}/retention",
        {"days": 1},
        witness=retention_w,
    )
    add("tenant", "delete", "DELETE", "/api/tenants/{tenant}/predictions", witness=retention_w)
    add("tenant", "delete", "DELETE", "/api/tenants/{tenant}/data", witness=retention_w)
    add("tenant", "read", "GET", "/api/retention", ghost=False)
    # the share of the tenant's direct calls the prediction log keeps
    sampling_w = ("/api/tenants/{tenant}/prediction-log",)
    add("tenant", "modify", "PUT", sampling_w[0], {"rate": 1, "payloads": True}, witness=sampling_w)

    # ---- money: usage, invoices, statements, platform billing
    add("usage", "read", "GET", "/api/usage?tenant={tenant}")
    add("usage", "read", "GET", "/api/usage?tenant={tenant}&format=csv")
    add("usage", "list", "GET", "/api/usage", refused=False, ghost=False)
    add("usage", "list", "GET", "/api/usage?format=csv", refused=False, ghost=False)
    add("usage", "list", "GET", "/api/usage?model=acme/{model}", refused=False, ghost=False)
    for path in ("/api/invoices/{invoice}", "/api/invoices/{invoice}/credit-notes"):
        add("invoice", "read", "GET", path)
    add("invoice", "list", "GET", "/api/invoices", refused=False, ghost=False)
    add("invoice", "list", "GET", "/api/invoices?tenant={tenant}")
    add("invoice", "modify", "POST", "/api/invoices/{invoice}/finalize", witness=MONEY_W)
    add(
        "invoice",
        "modify",
        "POST",
        "/api/invoices/{invoice}/credit-notes",
        {"reason": "x", "lines": [{"description": "x", "amount_micros": 1}]},
        witness=MONEY_W,
    )
    add("statement", "read", "GET", "/api/statements/{statement}")
    add("statement", "list", "GET", "/api/statements", refused=False, ghost=False)
    add("statement", "list", "GET", "/api/statements?publisher={tenant}")
    add("statement", "modify", "POST", "/api/statements/{statement}/finalize", witness=MONEY_W)
    period = time.strftime("%Y-%m", time.gmtime())
    add("billing", "modify", "POST", "/api/billing/generate", {"period": period}, ghost=False)
    add("billing", "read", "GET", f"/api/billing/recompute?period={period}", ghost=False)
    add("billing", "read", "GET", f"/api/billing/reconciliation?period={period}", ghost=False)

    # ---- operations surfaces
    for path in ("/healthz", "/readyz", "/v2", "/v2/health/live", "/v2/health/ready"):
        add("operations", "read", "GET", path, refused=False, ghost=False)
    add(
        "operations",
        "read",
        "GET",
        "/metrics",
        ghost=False,
    )
    # the rule file names every endpoint; the costs every tenant's spend: the operator's
    add("operations", "read", "GET", "/api/slos/rules", ghost=False)
    add("billing", "read", "GET", "/api/costs", ghost=False)
    # ---- billing the victim, or through its model: usage reported by someone else. Last:
    # a report that gets through (a hole) adds usage the list attacks above would see.
    add(
        "model",
        "bill",
        "POST",
        "/api/usage/events",
        [usage_event("forge-1", "globex", "acme/{model}")],
        witness=MONEY_W,
    )
    add(
        "tenant",
        "bill",
        "POST",
        "/api/usage/events",
        [usage_event("forge-2", "acme", f"globex/{ATTACKER_MODEL}")],
        ghost=False,
        witness=MONEY_W,
    )

    add(
        "price",
        "bill",
        "POST",
        "/api/prices",
        {
            "model": f"globex/{ATTACKER_MODEL}",
            "unit": "prediction",
            "unit_price_micros": 1,
            "revenue_share_bps": 10_000,
        },
        ghost=False,
        witness=("/api/prices?model=globex/" + ATTACKER_MODEL,),
    )
    return ops


OPS = _ops()
UNAUTHENTICATED = frozenset({ANONYMOUS, REVOKED})
