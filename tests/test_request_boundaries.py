"""What reaches the database from a request: ids past the integer range are unknown
ids (404), NUL in any string is refused up front (400), and an unexpected error is
a problem+json 500 that leaves the client's keep-alive connection usable."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from fastapi import APIRouter
from starlette.testclient import TestClient

from modelport.app import Services
from tests.conftest import ADMIN_KEY, LiveServer

ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}
PAST_32_BITS = 2**32
PAST_64_BITS = 2**64

ID_ROUTES = [
    ("GET", "/api/grants/{id}", "grant_not_found"),
    ("DELETE", "/api/grants/{id}", "grant_not_found"),
    ("GET", "/api/invoices/{id}", "invoice_not_found"),
    ("POST", "/api/invoices/{id}/finalize", "invoice_not_found"),
    ("GET", "/api/invoices/{id}/credit-notes", "invoice_not_found"),
    ("GET", "/api/statements/{id}", "statement_not_found"),
    ("POST", "/api/statements/{id}/finalize", "statement_not_found"),
    ("GET", "/api/usage/authorizations/{id}", "usage_authorization_not_found"),
    ("DELETE", "/api/usage/authorizations/{id}", "usage_authorization_not_found"),
]


@pytest.mark.parametrize("ident", [PAST_32_BITS, PAST_64_BITS, 0, -1])
def test_ids_past_the_integer_range_are_unknown_ids(client: TestClient, ident: int) -> None:
    for method, template, code in ID_ROUTES:
        response = client.request(method, template.format(id=ident))
        assert response.status_code == 404, (method, template, response.text)
        assert response.json()["code"] == code
    credit = {"reason": "r", "lines": [{"description": "d", "amount_micros": 1}]}
    response = client.post(f"/api/invoices/{ident}/credit-notes", json=credit)
    assert response.status_code == 404 and response.json()["code"] == "invoice_not_found"


def test_a_deployment_id_past_the_integer_range_is_an_unknown_deployment(
    services: Services,
) -> None:
    from modelport.errors import NotFound
    from modelport.serving.endpoints import repository as repo

    with services.database.transaction() as session, pytest.raises(NotFound) as caught:
        repo.get_deployment(session, "fraud", PAST_32_BITS)
    assert caught.value.code == "deployment_not_found"


@pytest.mark.parametrize("cursor", [str(2**63), str(PAST_64_BITS), "\u00b2"])
def test_a_usage_cursor_past_the_ledger_is_refused(client: TestClient, cursor: str) -> None:
    response = client.get("/api/usage", params={"tenant": "acme", "cursor": cursor})
    assert response.status_code == 400 and response.json()["code"] == "invalid_cursor"


def test_a_spending_cap_past_64_bits_is_refused(client: TestClient) -> None:
    assert client.post("/api/tenants", json={"slug": "acme", "name": "Acme"}).status_code == 201
    for cap in (2**63, PAST_64_BITS):
        body = {"hard_cap_micros": cap, "soft_cap_micros": None}
        response = client.put("/api/budgets/acme", json=body)
        assert response.status_code == 400, response.text
        assert response.json()["code"] == "invalid_request"


NUL_QUERIES = [
    "/api/models?license=%00",
    "/api/models?license=mit%00x",
    "/api/keys?tenant=%00",
    "/api/grants?tenant=a%00",
    "/api/invoices?tenant=%00",
    "/api/endpoints?tenant=%00",
    "/api/usage?tenant=%00",
    "/api/statements?publisher=%00",
    "/api/audit?actor=%00",
    "/api/audit?actor=%00&%00=1",
]
NUL_BODIES = [
    ("/api/endpoints", {"name": "fraud", "tenant": "acme", "description": "a \u0000 b"}),
    (
        "/api/backends",
        {"name": "remote", "tenant": "acme", "kind": "remote_v2", "url": "http://x\u0000/"},
    ),
    (
        "/api/backends",
        {
            "name": "remote",
            "tenant": "acme",
            "kind": "remote_v2",
            "url": "http://x/",
            "capabilities": {"models": {"acme/m\u0000": "m"}},
        },
    ),
    ("/api/models", {"owner": "acme", "name": "m", "license": "MIT\u0000"}),
    ("/api/models", {"owner": "acme", "name": "m", "description": "a \u0000 b"}),
]


def test_nul_in_a_query_string_is_refused_before_the_database(client: TestClient) -> None:
    for url in NUL_QUERIES:
        response = client.get(url)
        assert response.status_code == 400, (url, response.text)
        assert response.headers["content-type"] == "application/problem+json"
        assert response.json()["code"] == "invalid_request"


def test_nul_in_a_json_body_string_is_refused_before_the_database(client: TestClient) -> None:
    assert client.post("/api/tenants", json={"slug": "acme", "name": "Acme"}).status_code == 201
    for path, body in NUL_BODIES:
        response = client.post(path, json=body)
        assert response.status_code == 400, (path, response.text)
        assert response.json()["code"] == "invalid_request"
    # Without a content type FastAPI still reads JSON: so does the check.
    raw = b'{"owner": "acme", "name": "m", "license": "MIT\\u0000"}'
    response = client.post("/api/models", content=raw, headers={"Content-Type": ""})
    assert response.status_code == 400 and response.json()["code"] == "invalid_request"


def test_inference_bodies_may_carry_nul(client: TestClient) -> None:
    # A BYTES tensor may hold any byte: the body reaches the route (here: no endpoint).
    body = {"inputs": [{"name": "text", "datatype": "BYTES", "shape": [1], "data": ["a\u0000"]}]}
    response = client.post("/api/endpoints/nope:predict", json=body)
    assert response.status_code == 404 and response.json()["code"] == "endpoint_not_found"


def test_escaped_backslashes_before_u0000_are_not_a_nul(client: TestClient) -> None:
    # "\\u0000" is a backslash and the text u0000, which PostgreSQL stores fine.
    client.post("/api/tenants", json={"slug": "acme", "name": "Acme"})
    response = client.post(
        "/api/models", json={"owner": "acme", "name": "m", "description": "\\u0000"}
    )
    assert response.status_code == 201, response.text
    assert client.get("/api/models/acme/m").json()["description"] == "\\u0000"


@pytest.fixture
def failing_server(services: Services) -> Iterator[LiveServer]:
    """The live server with one extra route that fails the way a bug does."""
    server = LiveServer(services)
    router = APIRouter()

    @router.get("/api/boom")
    def boom() -> None:
        raise RuntimeError("a bug")

    server.server.config.app.include_router(router)
    server.start()
    yield server
    server.stop()


def test_a_500_is_a_problem_and_the_connection_stays_usable(
    failing_server: LiveServer,
) -> None:
    with httpx.Client(base_url=failing_server.url, headers=ADMIN) as http:
        for _ in range(3):
            failed = http.get("/api/boom", headers={"X-Request-Id": "req-1"})
            assert failed.status_code == 500
            assert failed.headers["content-type"] == "application/problem+json"
            body = failed.json()
            assert body["code"] == "internal_error" and "a bug" not in body["detail"]
            assert "req-1" in body["detail"] and failed.headers["x-request-id"] == "req-1"
            assert http.get("/api/models").status_code == 200
        for url in NUL_QUERIES[:3]:
            assert http.get(url).status_code == 400
            assert http.get("/api/models").status_code == 200
        connections = http._transport._pool.connections  # type: ignore[attr-defined]
        assert len(connections) == 1  # one keep-alive connection served all of it


def test_readiness_probes_do_not_tell_anyone_the_database_error(
    client: TestClient, services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sqlalchemy.exc import OperationalError

    def down() -> None:
        raise OperationalError("SELECT 1", {}, Exception('host "db.internal" user "mp_secret"'))

    monkeypatch.setattr(services.database, "transaction", down)
    for path in ("/readyz", "/v2/health/ready"):
        response = client.get(path, headers={})
        assert response.status_code == 503, response.text
        assert "db.internal" not in response.text and "mp_secret" not in response.text
