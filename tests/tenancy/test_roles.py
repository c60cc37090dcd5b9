"""Every role against every kind of action, over HTTP, within its own tenant.

The table says who may do each action; everyone else must get 403 (never 404:
inside one's own tenant nothing is hidden). Each action prepares fresh resources
so that the order of the table does not matter.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

import httpx
import pytest

from tests.registry.helpers import manifest_for
from tests.tenancy.conftest import ADMIN, ROLES, SERVICE_ACCOUNT, World, model_bytes

ALL = frozenset({*ROLES, SERVICE_ACCOUNT, "admin"})
PUBLISHERS = frozenset({"owner", "publisher", SERVICE_ACCOUNT, "admin"})
APPROVERS = frozenset({"owner", "approver", "admin"})
DEPLOYERS = frozenset({"owner", "deployer", "admin"})
CALLERS = frozenset({"owner", "consumer", "admin"})
OWNERS = frozenset({"owner", "admin"})

Headers = dict[str, str]
Action = Callable[[World, Headers], httpx.Response]


def fresh() -> str:
    return "x" + uuid.uuid4().hex[:10]


def fresh_version(world: World, state: str | None = None) -> str:
    """A new version of acme/private, moved to ``state`` by the seeding shortcut."""
    version = fresh()
    world.publish("acme", "private", version)
    path = {
        None: [],
        "validated": ["validated"],
        "approved": ["validated", "approved"],
    }[state]
    for to in path:
        world.force_state("acme", "private", version, to)
    return version


def transition(to: str, start: str | None) -> Action:
    def act(world: World, headers: Headers) -> httpx.Response:
        version = fresh_version(world, start)
        return world.client.post(
            f"/api/models/acme/private/versions/{version}/transitions",
            json={"to": to, "reason": "table"},
            headers=headers,
        )

    return act


def publish(world: World, headers: Headers) -> httpx.Response:
    manifest = manifest_for(model_bytes("acme/private"))
    return world.client.post(
        "/api/models/acme/private/versions",
        json={"version": fresh(), "manifest": manifest},
        headers=headers,
    )


def key_for_someone_else(world: World, headers: Headers) -> httpx.Response:
    target = fresh()
    world.services.tenancy.add_member("acme", target, roles=["consumer"], actor="admin")
    return world.client.post(
        "/api/keys", json={"tenant": "acme", "member": target, "name": "k"}, headers=headers
    )


def infer(world: World, headers: Headers) -> httpx.Response:
    body = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1, 2, 3, 4]}]}
    return world.client.post("/v2/models/acme/private/versions/1/infer", json=body, headers=headers)


def get(path: str) -> Action:
    return lambda world, headers: world.client.get(path, headers=headers)


def read_blob(world: World, headers: Headers) -> httpx.Response:
    return world.client.get(f"/api/blobs/{world.digests['acme/private']}", headers=headers)


# action: (who may, status on success, how)
TABLE: dict[str, tuple[frozenset[str], int, Action]] = {
    "catalog": (ALL, 200, get("/api/models")),
    "read model": (ALL, 200, get("/api/models/acme/private")),
    "read versions": (ALL, 200, get("/api/models/acme/private/versions")),
    "read version": (ALL, 200, get("/api/models/acme/private/versions/1")),
    "read aliases": (ALL, 200, get("/api/models/acme/private/aliases")),
    "read lineage": (ALL, 200, get("/api/models/acme/private/versions/1/lineage")),
    "read blob": (ALL, 200, read_blob),
    "read tenant": (ALL, 200, get("/api/tenants/acme")),
    "v2 metadata": (ALL, 200, get("/v2/models/acme/private/versions/1")),
    "create model": (
        PUBLISHERS,
        201,
        lambda w, h: w.client.post(
            "/api/models", json={"owner": "acme", "name": fresh()}, headers=h
        ),
    ),
    "publish version": (PUBLISHERS, 201, publish),
    "start upload": (PUBLISHERS, 202, lambda w, h: w.client.post("/api/uploads", headers=h)),
    "deprecate": (PUBLISHERS, 201, transition("deprecated", "approved")),
    "approve": (APPROVERS, 201, transition("approved", "validated")),
    "reject": (APPROVERS, 201, transition("rejected", None)),
    "deploy": (DEPLOYERS, 201, transition("deployed", "approved")),
    "move alias": (
        DEPLOYERS,
        200,
        lambda w, h: w.client.put(
            f"/api/models/acme/private/aliases/{fresh()}", json={"version": "1"}, headers=h
        ),
    ),
    "load": (
        DEPLOYERS,
        200,
        lambda w, h: w.client.post(
            "/v2/repository/models/acme/private/load",
            json={"parameters": {"version": "1"}},
            headers=h,
        ),
    ),
    "infer": (CALLERS, 200, infer),
    "list members": (OWNERS, 200, get("/api/tenants/acme/members")),
    "add member": (
        OWNERS,
        201,
        lambda w, h: w.client.post(
            "/api/tenants/acme/members", json={"name": fresh(), "roles": ["consumer"]}, headers=h
        ),
    ),
    "change tenant": (
        OWNERS,
        200,
        lambda w, h: w.client.patch("/api/tenants/acme", json={"name": "ACME"}, headers=h),
    ),
    "key for someone else": (OWNERS, 201, key_for_someone_else),
    "share a model": (
        OWNERS,
        201,
        lambda w, h: w.client.post(
            "/api/grants",
            json={"namespace": "acme", "grantee": "globex", "model": fresh_model(w)},
            headers=h,
        ),
    ),
    "read audit log": (OWNERS, 200, get("/api/audit")),
    "create tenant": (
        frozenset({"admin"}),
        201,
        lambda w, h: w.client.post("/api/tenants", json={"slug": fresh()}, headers=h),
    ),
}


def fresh_model(world: World) -> str:
    name = fresh()
    world.services.registry.create_model("acme", name, actor="seed")
    return name


def own_key(world: World, headers: Headers) -> httpx.Response:
    return world.client.post("/api/keys", json={"name": "mine"}, headers=headers)


@pytest.mark.parametrize("who", sorted(ALL))
def test_role_table(world: World, who: str) -> None:
    headers = ADMIN if who == "admin" else world.key("acme", who)
    wrong = []
    for action, (allowed, success, act) in TABLE.items():
        response = act(world, headers)
        want = success if who in allowed else 403
        if response.status_code != want:
            wrong.append(f"{action}: {response.status_code} (want {want}) {response.text[:200]}")
    if who != "admin":
        # Every member (and service account) manages its own keys.
        response = own_key(world, headers)
        if response.status_code != 201:
            wrong.append(f"own key: {response.status_code} {response.text[:200]}")
    assert not wrong, f"{who}:\n" + "\n".join(wrong)


def test_denials_say_which_permission(world: World) -> None:
    response = world.client.post(
        "/api/models", json={"owner": "acme", "name": "n"}, headers=world.key("acme", "consumer")
    )
    assert response.status_code == 403
    problem = response.json()
    assert problem["code"] == "forbidden" and problem["permission"] == "model.register"
    assert response.headers["content-type"] == "application/problem+json"


def test_no_key_or_an_unknown_key_is_401(world: World) -> None:
    for headers in (
        {},
        {"Authorization": "Bearer nope"},
        {"Authorization": "Basic " + "x" * 20},
        {"Authorization": f"Bearer mp_live_{'a' * 16}_{'b' * 40}"},
    ):
        for method, path in (("GET", "/api/models"), ("POST", "/v2/models/acme/private/infer")):
            response = world.client.request(method, path, headers=headers)
            assert response.status_code == 401, (headers, path, response.text)
            assert response.headers["www-authenticate"].startswith("Bearer")
    # A real key id with a wrong secret is just as unknown.
    real = world.keys["acme", "owner"]
    forged = real[: -len("x" * 40)] + "x" * 40
    response = world.client.get("/api/models", headers={"Authorization": f"Bearer {forged}"})
    assert response.status_code == 401 and response.json()["code"] == "invalid_credentials"


def test_roles_change_at_once(world: World) -> None:
    consumer = world.key("acme", "consumer")
    body = {"owner": "acme", "name": "promoted"}
    assert world.client.post("/api/models", json=body, headers=consumer).status_code == 403
    response = world.client.patch(
        "/api/tenants/acme/members/consumer",
        json={"roles": ["consumer", "publisher"]},
        headers=world.key("acme", "owner"),
    )
    assert response.status_code == 200, response.text
    assert world.client.post("/api/models", json=body, headers=consumer).status_code == 201
    world.client.patch(
        "/api/tenants/acme/members/consumer",
        json={"roles": ["consumer"]},
        headers=world.key("acme", "owner"),
    )
    body["name"] = "demoted"
    assert world.client.post("/api/models", json=body, headers=consumer).status_code == 403


def test_only_an_admin_gives_the_admin_role(world: World) -> None:
    owner = world.key("acme", "owner")
    body = {"name": "root", "roles": ["admin"]}
    response = world.client.post("/api/tenants/acme/members", json=body, headers=owner)
    assert response.status_code == 403
    response = world.client.post("/api/tenants/acme/members", json=body, headers=ADMIN)
    assert response.status_code == 201
    bad = world.client.post(
        "/api/tenants/acme/members", json={"name": "x", "roles": ["wizard"]}, headers=owner
    )
    assert bad.status_code == 400 and bad.json()["code"] == "invalid_role"
