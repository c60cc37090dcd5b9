"""Errors are rendered in each surface's format, unexpected ones included."""

from __future__ import annotations

import httpx
import pytest
from fastapi import FastAPI
from starlette.testclient import TestClient

from modelport.api.problems import install_error_handlers
from modelport.errors import Conflict
from tests.conftest import ADMIN_KEY, LiveServer


@pytest.fixture
def client() -> TestClient:
    app = FastAPI()
    install_error_handlers(app)

    @app.get("/api/boom")
    def api_boom() -> None:
        raise RuntimeError("secret detail")

    @app.get("/v2/boom")
    def v2_boom() -> None:
        raise RuntimeError("secret detail")

    @app.get("/api/conflict")
    def conflict() -> None:
        raise Conflict("version 3 exists with another digest", code="version_exists")

    return TestClient(app, raise_server_exceptions=False)


def test_unexpected_error_on_api_is_problem_json_without_internals(client: TestClient) -> None:
    response = client.get("/api/boom")
    assert response.status_code == 500
    assert response.headers["content-type"] == "application/problem+json"
    body = response.json()
    assert body["code"] == "internal_error"
    assert "secret" not in response.text


def test_unexpected_error_on_v2_is_the_protocols_error_object(client: TestClient) -> None:
    response = client.get("/v2/boom")
    assert response.status_code == 500
    assert response.json() == {"error": response.json()["error"], "code": "internal_error"}
    assert "secret" not in response.text


def test_modelport_error_keeps_its_code_and_status(client: TestClient) -> None:
    response = client.get("/api/conflict")
    assert response.status_code == 409
    assert response.json()["code"] == "version_exists"


def test_malformed_json_is_described_alike_on_every_surface(live_server: LiveServer) -> None:
    headers = {"Authorization": f"Bearer {ADMIN_KEY}", "Content-Type": "application/json"}
    body = b'{"owner": "acme", oops}'
    with httpx.Client(base_url=live_server.url, headers=headers) as http:
        api = http.post("/api/models", content=body)
        v2 = http.post("/v2/repository/index", content=body)
        v1 = http.post("/v1/chat/completions", content=body)
    assert (api.status_code, v2.status_code, v1.status_code) == (400, 400, 400)
    problem = api.json()
    assert api.headers["content-type"] == "application/problem+json"
    assert problem["code"] == v2.json()["code"] == v1.json()["error"]["code"] == "invalid_json"
    assert problem["detail"].startswith("request body is not valid JSON: ")
    assert "line 1 column 19" in problem["detail"]
    assert problem["detail"] == v2.json()["error"] == v1.json()["error"]["message"]
    assert "errors" not in problem and "field" not in problem
    # A well-formed body that breaks the schema still names its field.
    wrong = httpx.post(live_server.url + "/api/models", json={"owner": 3}, headers=headers)
    assert wrong.status_code == 400 and wrong.json()["code"] == "invalid_request"
