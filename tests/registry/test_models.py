"""POST/GET /api/models and the catalog with its filters and cursor pagination."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from modelport.app import Services
from tests.conftest import ensure_tenant
from tests.registry.helpers import Registry, manifest_for


@pytest.fixture(autouse=True)
def _acme(services: Services) -> None:
    services.tenancy.create_tenant("acme", actor="admin")


def test_create_and_get_model(client: TestClient) -> None:
    body = {
        "owner": "acme",
        "name": "fraud-risk",
        "task": "classification",
        "description": "Scores card payments",
        "tags": ["payments", "fraud", "fraud"],
        "license": "apache-2.0",
        "visibility": "public",
    }
    created = client.post("/api/models", json=body)
    assert created.status_code == 201
    assert created.headers["location"] == "/api/models/acme/fraud-risk"
    got = client.get("/api/models/acme/fraud-risk").json()
    assert got == created.json()
    assert got["license"] == "Apache-2.0"
    assert got["tags"] == ["fraud", "payments"]
    assert got["visibility"] == "public"
    assert got["created_by"] == "admin"


def test_duplicate_model_is_409(client: TestClient) -> None:
    assert client.post("/api/models", json={"owner": "acme", "name": "m"}).status_code == 201
    again = client.post("/api/models", json={"owner": "acme", "name": "m", "task": "other"})
    assert again.status_code == 409
    assert again.headers["content-type"].startswith("application/problem+json")
    assert again.json()["code"] == "model_exists"


def test_unknown_model_is_404(client: TestClient) -> None:
    response = client.get("/api/models/acme/nothing")
    assert response.status_code == 404
    assert response.json()["code"] == "model_not_found"


@pytest.mark.parametrize(
    ("body", "code", "field"),
    [
        ({"owner": "Acme", "name": "m"}, "invalid_model_name", "owner"),
        ({"owner": "acme", "name": "-m"}, "invalid_model_name", "name"),
        ({"owner": "acme", "name": "m", "license": "Beerware-ish"}, "invalid_license", "license"),
        (
            {"owner": "acme", "name": "m", "visibility": "secret"},
            "invalid_visibility",
            "visibility",
        ),
        ({"owner": "acme", "name": "m", "tags": ["Bad Tag"]}, "invalid_tag", "tags"),
        ({"owner": "acme", "name": "m", "task": "Not A Task"}, "invalid_task", "task"),
    ],
)
def test_invalid_model_fields(client: TestClient, body: dict, code: str, field: str) -> None:
    response = client.post("/api/models", json=body)
    assert response.status_code == 400
    problem = response.json()
    assert (problem["code"], problem["field"]) == (code, field)


def test_unexpected_fields_are_refused(client: TestClient) -> None:
    response = client.post("/api/models", json={"owner": "acme", "name": "m", "colour": "red"})
    assert response.status_code == 400
    assert response.json()["errors"][0]["field"] == "colour"


def test_routes_need_the_admin_key(anon_client: TestClient) -> None:
    assert anon_client.post("/api/models", json={"owner": "a", "name": "b"}).status_code == 401
    assert anon_client.get("/api/models/a/b").status_code == 401
    assert anon_client.get("/api/models/a/b/versions").status_code == 401
    assert anon_client.put("/api/models/a/b/aliases/prod", json={"version": "1"}).status_code == 401


# ---- catalog -----------------------------------------------------------------


@pytest.fixture
def catalog(registry: Registry) -> Registry:
    """Nine models: three owners, two tasks, two licenses, tags, onnx and other formats."""
    data = b"weights of a format the runtime lacks"
    registry.upload(data)
    for i in range(9):
        owner = ["acme", "globex", "initech"][i % 3]
        registry.create_model(
            f"{owner}/model-{i}",
            task="classification" if i % 2 == 0 else "embedding",
            license="MIT" if i < 5 else "Apache-2.0",
            tags=["vision"] if i % 3 == 0 else ["text", "small"],
            description=f"Model number {i}" + (" for Fraud scoring" if i in (2, 7) else ""),
        )
        if i % 4 == 0:
            registry.publish(f"{owner}/model-{i}", "1")
        elif i % 4 == 1:
            registry.publish(
                f"{owner}/model-{i}", "1", manifest_for(data, path="w.bin", fmt="gguf")
            )
    return registry


def _names(client: TestClient, **params: object) -> list[str]:
    response = client.get("/api/models", params={"limit": 200, **params})
    assert response.status_code == 200, response.text
    assert response.json()["next_cursor"] is None
    return [m["name"] for m in response.json()["items"]]


def test_catalog_filters(catalog: Registry) -> None:
    c = catalog.client
    assert _names(c) == [f"model-{i}" for i in range(9)]
    assert _names(c, owner="globex") == ["model-1", "model-4", "model-7"]
    assert _names(c, task="embedding") == ["model-1", "model-3", "model-5", "model-7"]
    assert _names(c, license="apache-2.0") == ["model-5", "model-6", "model-7", "model-8"]
    assert _names(c, tag="vision") == ["model-0", "model-3", "model-6"]
    assert _names(c, format="onnx") == ["model-0", "model-4", "model-8"]
    assert _names(c, format="gguf") == ["model-1", "model-5"]
    assert _names(c, q="FRAUD") == ["model-2", "model-7"]
    assert _names(c, q="model-1") == ["model-1"]
    assert _names(c, q="number 8") == ["model-8"]
    assert _names(c, owner="acme", tag="vision", format="onnx") == ["model-0"]
    assert _names(c, q="%") == []
    assert _names(c, owner="nobody") == []


def test_catalog_pages_have_no_duplicates_or_omissions(catalog: Registry) -> None:
    c = catalog.client
    for limit in (1, 2, 4, 9, 10):
        seen: list[str] = []
        cursor = None
        pages = 0
        while True:
            params: dict[str, object] = {"limit": limit}
            if cursor:
                params["cursor"] = cursor
            page = c.get("/api/models", params=params).json()
            assert len(page["items"]) <= limit
            seen += [m["model"] for m in page["items"]]
            pages += 1
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert len(seen) == len(set(seen)) == 9
        assert pages == -(-9 // limit)


def test_catalog_pagination_with_a_filter(catalog: Registry) -> None:
    c = catalog.client
    first = c.get("/api/models", params={"task": "embedding", "limit": 3}).json()
    assert [m["name"] for m in first["items"]] == ["model-1", "model-3", "model-5"]
    rest = c.get(
        "/api/models", params={"task": "embedding", "limit": 3, "cursor": first["next_cursor"]}
    ).json()
    assert [m["name"] for m in rest["items"]] == ["model-7"]
    assert rest["next_cursor"] is None


@pytest.mark.parametrize("params", [{"limit": 0}, {"limit": 201}, {"cursor": "garbage!"}])
def test_catalog_refuses_bad_paging(client: TestClient, params: dict) -> None:
    response = client.get("/api/models", params=params)
    assert response.status_code == 400
    assert response.json()["code"] in ("invalid_request", "invalid_cursor")


def test_catalog_cursor_error_code(client: TestClient) -> None:
    response = client.get("/api/models", params={"cursor": "bm9wZQ"})
    assert response.json()["code"] == "invalid_cursor"


def test_optional_fields_may_be_null(client: TestClient) -> None:
    body = {"owner": "acme", "name": "m", "task": None, "description": None, "tags": None}
    response = client.post("/api/models", json={**body, "license": None, "visibility": None})
    assert response.status_code == 201
    model = response.json()
    assert (model["license"], model["task"], model["visibility"]) == (None, "", "private")


def test_a_model_of_an_owner_that_is_no_tenant_is_refused(client: TestClient) -> None:
    """The admin may create models in any namespace, but only a tenant's: a model of no
    tenant could never be deployed nor billed. The answer says how to make the tenant."""
    response = client.post("/api/models", json={"owner": "nobody", "name": "m"})
    assert response.status_code == 404
    problem = response.json()
    assert (problem["code"], problem["tenant"]) == ("tenant_not_found", "nobody")
    assert "modelport tenants create nobody" in problem["detail"]
    assert client.get("/api/models/nobody/m").status_code == 404
    ensure_tenant(client, "nobody")
    assert client.post("/api/models", json={"owner": "nobody", "name": "m"}).status_code == 201
