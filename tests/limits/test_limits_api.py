"""/api/limits and /api/budgets on both databases: who may set what, validation, effect;
and rate limits on /api mutations."""

from __future__ import annotations

import pytest

from tests.limits.conftest import Platform, PlatformFactory, bearer


@pytest.fixture
def world(make_platform: PlatformFactory, database_url: str) -> tuple[Platform, dict[str, str]]:
    """acme (owner, publisher, two consumers) with acme/adder; globex (owner, publisher)."""
    platform = make_platform(database_url=database_url)
    keys = {
        f"acme-{name}": key
        for name, key in platform.tenant(
            "acme",
            ("olive", ["owner"]),
            ("pat", ["publisher"]),
            ("cody", ["consumer"]),
            ("cara", ["consumer"]),
        ).items()
    }
    keys |= {
        f"globex-{name}": key
        for name, key in platform.tenant(
            "globex", ("gus", ["owner"]), ("gail", ["publisher"])
        ).items()
    }
    platform.publisher.adder()
    return platform, keys


def put(platform: Platform, key: str | None, path: str, body: dict):
    headers = bearer(key) if key else {}
    return platform.client.put(f"/api/{path}", json=body, headers=headers)


def test_admin_manages_a_tenants_limits(world) -> None:
    platform, _ = world
    created = put(platform, None, "limits/tenant/acme", {"rpm": 5, "concurrency": 2})
    assert created.status_code == 200, created.text
    body = created.json()
    assert body | {"updated_at": None} == {
        "scope_type": "tenant",
        "scope_id": "acme",
        "tenant": "acme",
        "rpm": 5,
        "concurrency": 2,
        "tpm": None,
        "jobs": None,
        "job_concurrency": None,
        "updated_at": None,
        "updated_by": "admin",
    }
    assert platform.client.get("/api/limits/tenant/acme").json() == body
    listed = platform.client.get("/api/limits", params={"tenant": "acme"}).json()["items"]
    assert listed == [body]
    replaced = put(platform, None, "limits/tenant/acme", {"tpm": 1000}).json()
    assert (replaced["rpm"], replaced["concurrency"], replaced["tpm"]) == (None, None, 1000)
    assert platform.client.delete("/api/limits/tenant/acme").status_code == 204
    missing = platform.client.get("/api/limits/tenant/acme")
    assert missing.status_code == 404 and missing.json()["code"] == "limits_not_found"
    assert platform.client.delete("/api/limits/tenant/acme").status_code == 404


def test_job_limits_are_a_tenants_only(world) -> None:
    platform, keys = world
    both = put(platform, None, "limits/tenant/acme", {"jobs": 5, "job_concurrency": 2}).json()
    assert (both["jobs"], both["job_concurrency"], both["rpm"]) == (5, 2, None)
    assert platform.client.get("/api/limits/tenant/acme").json()["job_concurrency"] == 2
    cody_key = platform.key_id(keys["acme-cody"])
    for path in (f"limits/key/{cody_key}", "limits/model/acme/adder"):
        refused = put(platform, None, path, {"rpm": 1, "jobs": 3})
        assert refused.status_code == 400, refused.text
        assert refused.json()["code"] == "job_limits_tenant_only"
        assert platform.client.get(f"/api/{path}").status_code == 404  # nothing written


@pytest.mark.parametrize(
    "body",
    [
        {"rpm": 0},
        {"concurrency": -1},
        {"rpm": "many"},
        {"rpm": 1, "burst": 3},
        {"tpm": 10**12},
        {"jobs": 0},
        {"job_concurrency": -2},
    ],
)
def test_invalid_limits_are_refused(world, body: dict) -> None:
    platform, _ = world
    response = put(platform, None, "limits/tenant/acme", body)
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_request"


def test_unknown_scopes(world) -> None:
    platform, _ = world
    assert put(platform, None, "limits/planet/earth", {"rpm": 1}).status_code == 400
    assert put(platform, None, "limits/tenant/nope", {"rpm": 1}).json()["code"] == (
        "tenant_not_found"
    )
    assert put(platform, None, "limits/key/nokey", {"rpm": 1}).json()["code"] == "key_not_found"
    assert put(platform, None, "limits/model/acme/nope", {"rpm": 1}).json()["code"] == (
        "model_not_found"
    )


def test_tenant_limits_belong_to_its_owners(world) -> None:
    platform, keys = world
    assert put(platform, keys["acme-olive"], "limits/tenant/acme", {"rpm": 9}).status_code == 200
    refused = put(platform, keys["acme-cody"], "limits/tenant/acme", {"rpm": 900})
    assert refused.status_code == 403 and refused.json()["code"] == "forbidden"
    assert (
        platform.client.get("/api/limits/tenant/acme", headers=bearer(keys["acme-cody"])).json()[
            "rpm"
        ]
        == 9
    )
    hidden = put(platform, keys["globex-gus"], "limits/tenant/acme", {"rpm": 1})
    assert hidden.status_code == 404


def test_key_limits_belong_to_whoever_manages_the_key(world) -> None:
    platform, keys = world
    cody_key = platform.key_id(keys["acme-cody"])
    own = put(platform, keys["acme-cody"], f"limits/key/{cody_key}", {"rpm": 3})
    assert own.status_code == 200 and own.json()["tenant"] == "acme"
    assert (
        put(platform, keys["acme-cara"], f"limits/key/{cody_key}", {"rpm": 99}).status_code == 403
    )
    assert (
        put(platform, keys["acme-olive"], f"limits/key/{cody_key}", {"rpm": 4}).status_code == 200
    )
    assert (
        put(platform, keys["globex-gus"], f"limits/key/{cody_key}", {"rpm": 1}).status_code == 404
    )


def test_model_limits_belong_to_its_publishers_and_apply_at_once(world) -> None:
    platform, keys = world
    set_by_publisher = put(platform, keys["acme-pat"], "limits/model/acme/adder", {"rpm": 1})
    assert set_by_publisher.status_code == 200, set_by_publisher.text
    assert set_by_publisher.json()["tenant"] == "acme"
    assert (
        put(platform, keys["acme-cody"], "limits/model/acme/adder", {"rpm": 9}).status_code == 403
    )
    assert (
        put(platform, keys["globex-gail"], "limits/model/acme/adder", {"rpm": 9}).status_code == 404
    )
    assert platform.infer(keys["acme-cody"]).status_code == 200
    assert platform.infer(keys["acme-cody"]).status_code == 429
    assert platform.infer(keys["acme-cara"]).status_code == 429  # same tenant, same allowance


def test_members_list_only_their_tenants_limits(world) -> None:
    platform, keys = world
    put(platform, None, "limits/tenant/acme", {"rpm": 10})
    put(platform, None, "limits/tenant/globex", {"rpm": 20})
    put(platform, None, "limits/model/acme/adder", {"concurrency": 1})
    mine = platform.client.get("/api/limits", headers=bearer(keys["acme-cody"])).json()["items"]
    assert {(i["scope_type"], i["scope_id"]) for i in mine} == {
        ("tenant", "acme"),
        ("model", "acme/adder"),
    }
    theirs = platform.client.get(
        "/api/limits", params={"tenant": "globex"}, headers=bearer(keys["acme-cody"])
    )
    assert theirs.status_code == 404
    everything = platform.client.get("/api/limits").json()["items"]
    assert len(everything) == 3
    models = platform.client.get("/api/limits", params={"scope_type": "model"}).json()["items"]
    assert [i["scope_id"] for i in models] == ["acme/adder"]


def test_budgets_api(world) -> None:
    platform, keys = world
    owner = keys["acme-olive"]
    response = put(platform, owner, "budgets/acme", {"hard_cap_micros": 5, "soft_cap_micros": 2})
    assert response.status_code == 200, response.text
    budget = response.json()
    assert (budget["hard_cap_micros"], budget["soft_cap_micros"], budget["spent_micros"]) == (
        5,
        2,
        0,
    )
    assert len(budget["period"]) == 7
    assert (
        put(platform, keys["acme-cody"], "budgets/acme", {"hard_cap_micros": None}).status_code
        == 403
    )
    assert (
        platform.client.get("/api/budgets/acme", headers=bearer(keys["acme-cody"])).status_code
        == 403
    )
    platform.services.limits.add_spent("acme", 3)
    assert platform.infer(keys["acme-cody"]).status_code == 200
    alerts = platform.client.get("/api/budgets/acme/alerts", headers=bearer(owner)).json()["items"]
    assert [(a["kind"], a["spent_micros"], a["cap_micros"]) for a in alerts] == [("soft_cap", 3, 2)]
    platform.services.limits.add_spent("acme", 2)
    refused = platform.infer(keys["acme-cody"])
    assert refused.status_code == 402
    assert platform.client.get("/api/budgets/acme").json()["spent_micros"] == 5
    assert platform.client.delete("/api/budgets/acme", headers=bearer(owner)).status_code == 204
    assert platform.infer(keys["acme-cody"]).status_code == 200
    assert platform.client.get("/api/budgets/acme").status_code == 404
    assert put(platform, None, "budgets/acme", {"hard_cap_micros": -1}).status_code == 400


def test_api_mutations_count_against_the_callers_rpm(world) -> None:
    platform, keys = world
    put(platform, None, "limits/tenant/acme", {"rpm": 2})
    cody = bearer(keys["acme-cody"])
    made = [
        platform.client.post("/api/keys", json={"name": f"k{i}"}, headers=cody) for i in range(3)
    ]
    assert [r.status_code for r in made] == [201, 201, 429]
    assert made[0].headers["RateLimit-Limit"] == "2"
    assert made[1].headers["RateLimit-Remaining"] == "0"
    refused = made[2]
    assert refused.json()["code"] == "rate_limited"
    assert int(refused.headers["Retry-After"]) >= 29
    # Reads are not counted, and inference has its own allowance.
    assert platform.client.get("/api/models", headers=cody).status_code == 200
    assert platform.infer(keys["acme-cody"]).status_code == 200
