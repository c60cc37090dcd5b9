"""Random paths, headers and bodies thrown at the whole API (in process) over a seeded
world of two tenants: no 500s for anyone, and nothing of acme's private side ever
reaches globex (or a caller without a valid key)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.tenancy.conftest import ADMIN, ROLES, SERVICE_ACCOUNT, World

EXAMPLES = 300
TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
SEGMENT = st.one_of(TEXT.map(lambda s: quote(s, safe="") or "x"), st.just(".."))
"""A random path segment, percent-encoded (the server sees the raw characters)."""
STATES = ["candidate", "validated", "approved", "deployed", "deprecated", "archived", "rejected"]


@dataclass(frozen=True)
class Call:
    caller: str
    method: str
    path: str
    params: dict[str, str]
    headers: dict[str, str]
    body: bytes | None


def mostly(known: list[str]) -> st.SearchStrategy[str]:
    """A known value three times in four, else a random segment."""
    pick = st.sampled_from(known)
    return st.one_of(pick, pick, pick, SEGMENT)


def segments(world: World) -> dict[str, st.SearchStrategy[str]]:
    acme_keys = [k.split("_")[2] for (t, _), k in world.keys.items() if t == "acme"]
    return {
        "owner": mostly(["acme", "globex", "ghost"]),
        "name": mostly(["private", "public", "ghost"]),
        "version": mostly(["1", "2", "stable", "default"]),
        "alias": mostly(["stable", "default", "prod"]),
        "sub": st.sampled_from(["events", "validation", "signatures", "lineage", "transitions"]),
        "digest": mostly([*world.digests.values(), "sha256:" + "0" * 64]),
        "key": mostly(acme_keys),
        "tenant": mostly(["acme", "globex", "ghost"]),
        "member": mostly([*ROLES, SERVICE_ACCOUNT]),
        "id": st.integers(-1, 50).map(str) | SEGMENT,
        "end": st.sampled_from(["infer", "ready"]),
        "repo": st.sampled_from(["load", "unload"]),
    }


R = ["GET"]
TEMPLATES: list[tuple[str, list[str]]] = [
    ("/api/models", ["GET", "POST"]),
    ("/api/models/{owner}/{name}", R),
    ("/api/models/{owner}/{name}/versions", ["GET", "POST"]),
    ("/api/models/{owner}/{name}/versions/{version}", R),
    ("/api/models/{owner}/{name}/versions/{version}/{sub}", ["GET", "POST"]),
    ("/api/models/{owner}/{name}/aliases", R),
    ("/api/models/{owner}/{name}/aliases/{alias}", ["GET", "PUT", "DELETE"]),
    ("/api/models/{owner}/{name}/aliases/{alias}/history", R),
    ("/api/blobs/{digest}", ["GET", "HEAD"]),
    ("/api/uploads", ["POST"]),
    ("/api/uploads/{id}", ["GET", "PATCH", "PUT", "DELETE"]),
    ("/api/keys", ["GET", "POST"]),
    ("/api/keys/{key}", ["GET", "DELETE"]),
    ("/api/keys/{key}/rotate", ["POST"]),
    ("/api/tenants", ["GET", "POST"]),
    ("/api/tenants/{tenant}", ["GET", "PATCH"]),
    ("/api/tenants/{tenant}/members", ["GET", "POST"]),
    ("/api/tenants/{tenant}/members/{member}", ["GET", "PATCH", "DELETE"]),
    ("/api/grants", ["GET", "POST"]),
    ("/api/grants/{id}", ["GET", "DELETE"]),
    ("/api/audit", R),
    ("/v2", R),
    ("/v2/models/{owner}/{name}", R),
    ("/v2/models/{owner}/{name}/{end}", ["GET", "POST"]),
    ("/v2/models/{owner}/{name}/versions/{version}", R),
    ("/v2/models/{owner}/{name}/versions/{version}/{end}", ["GET", "POST"]),
    ("/v2/repository/index", ["POST"]),
    ("/v2/repository/models/{owner}/{name}/{repo}", ["POST"]),
]
ANY_METHOD = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"]

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | TEXT,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(TEXT, children, max_size=4),
    max_leaves=12,
)


def plausible_bodies(seg: dict[str, st.SearchStrategy[str]]) -> st.SearchStrategy[Any]:
    """Bodies shaped like the ones the routes expect, with hostile values."""
    return st.one_of(
        st.fixed_dictionaries({"to": st.sampled_from(STATES) | TEXT}),
        st.fixed_dictionaries({"version": seg["version"]}),
        st.fixed_dictionaries({"owner": seg["owner"], "name": seg["name"]}),
        st.fixed_dictionaries(
            {"name": seg["member"], "roles": st.lists(st.sampled_from([*ROLES, "admin"]) | TEXT)}
        ),
        st.fixed_dictionaries({"roles": st.lists(st.sampled_from([*ROLES, "admin"]))}),
        st.fixed_dictionaries(
            {"grantee": seg["tenant"], "namespace": seg["tenant"]},
            optional={"model": seg["name"]},
        ),
        st.fixed_dictionaries(
            {"name": TEXT},
            optional={
                "tenant": seg["tenant"],
                "member": seg["member"],
                "scopes": st.lists(TEXT),
                "expires_in_seconds": st.integers(-5, 10**12),
            },
        ),
        st.fixed_dictionaries({"slug": seg["tenant"]}),
        st.fixed_dictionaries({"require_separation": st.booleans()}),
        st.fixed_dictionaries({"parameters": st.dictionaries(TEXT, JSON, max_size=3)}),
        st.fixed_dictionaries(
            {"inputs": st.lists(st.dictionaries(TEXT, JSON, max_size=4), max_size=2)}
        ),
    )


@st.composite
def calls(draw: st.DrawFn, world: World, callers: list[str]) -> Call:
    seg = segments(world)
    template, methods = draw(st.sampled_from(TEMPLATES))
    path = template.format_map({k: draw(v) for k, v in seg.items() if "{" + k + "}" in template})
    if draw(st.integers(0, 9)) == 0:
        path = "/" + "/".join(draw(st.lists(SEGMENT, min_size=1, max_size=5)))
    method = draw(st.sampled_from(methods if draw(st.integers(0, 9)) else ANY_METHOD))
    params = draw(
        st.dictionaries(
            st.sampled_from(["owner", "tenant", "member", "limit", "cursor", "q", "digest"]),
            seg["tenant"] | TEXT,
            max_size=3,
        )
    )
    headers = draw(
        st.dictionaries(
            st.sampled_from(
                ["X-Request-Id", "Range", "Content-Range", "Inference-Header-Content-Length"]
            ),
            st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=20),
            max_size=2,
        )
    )
    kind = draw(st.sampled_from(["none", "json", "plausible", "plausible", "plausible", "bytes"]))
    body: bytes | None = None
    if kind == "json":
        body = json.dumps(draw(JSON)).encode()
    elif kind == "plausible":
        body = json.dumps(draw(plausible_bodies(seg))).encode()
    elif kind == "bytes":
        body = draw(st.binary(max_size=64))
    if body is not None:
        headers["Content-Type"] = draw(
            st.sampled_from(["application/json", "application/octet-stream", "text/plain"])
        )
    return Call(draw(st.sampled_from(callers)), method, path, params, headers, body)


def auth(world: World, caller: str) -> dict[str, str]:
    if caller == "admin":
        return ADMIN
    if caller == "anonymous":
        return {}
    if caller == "garbage":
        return {"Authorization": "Bearer mp_live_" + "a" * 16 + "_" + "b" * 40}
    tenant, role = caller.split(":")
    return world.key(tenant, role)


def send(world: World, call: Call) -> httpx.Response:
    return world.client.request(
        call.method,
        call.path,
        params=call.params,
        headers=call.headers | auth(world, call.caller),
        content=call.body,
    )


def acme_private_markers(world: World) -> list[str]:
    keys = [k.split("_")[2] for (t, _), k in world.keys.items() if t == "acme"]
    return ["acme/private", world.digests["acme/private"], *keys]


def touches_acme_private(world: World, call: Call) -> bool:
    """Whether the call is about acme's private side (which globex may never reach)."""
    path = call.path
    if "/acme/private" in path or path.startswith("/api/tenants/acme"):
        return True
    if any(marker in path for marker in acme_private_markers(world)[1:]):
        # Uploaders may ask whether a blob exists (HEAD), by design.
        return not (call.method == "HEAD" and path.startswith("/api/blobs/"))
    reads_acme = call.params.get("tenant") == "acme"
    return path in ("/api/audit", "/api/keys", "/api/grants") and reads_acme


def assert_not_broken(call: Call, response: httpx.Response) -> None:
    """No 500s. A 503 or 504 is a deliberate answer (e.g. the protocol's "not ready" for
    a model that is not loaded), and says so (in its body: a HEAD answer has none)."""
    if response.status_code in (503, 504):
        if call.method == "HEAD":
            return
        assert response.json().get("error") or response.json().get("detail"), call
        return
    assert response.status_code < 500, (call, response.text)


OUTSIDERS = [f"globex:{r}" for r in (*ROLES, SERVICE_ACCOUNT)] + ["anonymous", "garbage"]
EVERYONE = [*OUTSIDERS, *(f"acme:{r}" for r in (*ROLES, SERVICE_ACCOUNT)), "admin"]


def test_outsiders_never_reach_acme_private_side(world: World) -> None:
    markers = acme_private_markers(world)
    sent: list[str] = []
    """Everything outsiders sent so far: their own input may come back (e.g. in their
    audit log), nothing else of acme's may."""

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(calls(world, OUTSIDERS))
    def check(call: Call) -> None:
        sent.append(f"{call.path} {json.dumps(call.params)} {call.body!r}")
        response = send(world, call)
        assert_not_broken(call, response)
        if not response.is_success:
            return
        assert not touches_acme_private(world, call), (call, response.status_code, response.text)
        if call.method == "GET":
            asked = "\n".join(sent)
            leaked = [m for m in markers if m in response.text and m not in asked]
            assert not leaked, (call, leaked, response.text[:500])

    check()


def test_no_request_makes_a_500(world: World) -> None:
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(calls(world, EVERYONE))
    def check(call: Call) -> None:
        response = send(world, call)
        assert_not_broken(call, response)

    check()
