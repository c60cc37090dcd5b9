"""Errors are rendered in each surface's format, unexpected ones included."""

from __future__ import annotations

import pytest
from fastapi import FastAPI
from starlette.testclient import TestClient

from modelport.api.problems import install_error_handlers
from modelport.errors import Conflict


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
