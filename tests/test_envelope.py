"""The one envelope of every request (``api.envelope``), around small ASGI apps: the
same request id, refusals, error rendering and rate headers whether a request goes
through the application or is routed by the shortcut."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.testclient import TestClient
from starlette.types import Receive, Scope, Send

from modelport.api.envelope import Envelope
from modelport.api.hygiene import BodyRule
from modelport.api.limiting import STATE_KEY
from modelport.errors import NotFound
from modelport.tenancy.limits import RateDecision

DECISION = RateDecision(allowed=True, limit=5, remaining=4, reset_after=1.2)


async def through(scope: Scope, receive: Receive, send: Send) -> None:
    """The application: echoes the body's size; ``/api/wrapped`` turns a body refusal
    into an error of its own, ``/api/bug`` fails, ``/api/charged`` is rate limited."""
    request = Request(scope, receive)
    path = scope["path"]
    if path == "/api/bug":
        raise RuntimeError("secret internals")
    if path == "/api/charged":
        scope["state"][STATE_KEY] = DECISION
    try:
        body = await request.body()
    except Exception as exc:
        if path == "/api/wrapped":
            raise RuntimeError("could not read the body") from exc
        raise
    await JSONResponse({"size": len(body)})(scope, receive, send)


async def shortcut_endpoint(request: Request) -> Response:
    if request.path_params["name"] == "missing":
        raise NotFound("no such model", code="model_not_found")
    request.state.ratelimit = DECISION
    return JSONResponse({"name": request.path_params["name"]})


def shortcut(path: str) -> Any:
    if path.startswith("/v2/models/") and path.endswith("/infer"):
        return shortcut_endpoint, {"name": path.split("/")[3]}
    return None


@pytest.fixture
def client() -> TestClient:
    envelope = Envelope(
        through,
        rules=[BodyRule("/api/", 16, text_only=True), BodyRule("/v2/", 1 << 20)],
        max_json_depth=3,
        shortcut=shortcut,
    )
    return TestClient(envelope)


def test_a_request_id_is_honoured_or_made_on_both_paths(client: TestClient) -> None:
    given = {"X-Request-Id": "trace-9"}
    assert client.post("/api/echo", content=b"{}", headers=given).headers["x-request-id"] == (
        "trace-9"
    )
    assert client.post("/v2/models/m/infer", headers=given).headers["x-request-id"] == "trace-9"
    made = client.post("/api/echo", content=b"{}", headers={"X-Request-Id": "bad id!"})
    assert made.headers["x-request-id"] not in ("", "bad id!")


def test_rate_headers_come_on_both_paths(client: TestClient) -> None:
    for answered in (client.post("/api/charged", content=b"{}"), client.post("/v2/models/m/infer")):
        assert answered.status_code == 200
        assert answered.headers["ratelimit-limit"] == "5"
        assert answered.headers["ratelimit-remaining"] == "4"
        assert answered.headers["ratelimit-reset"] == "2"
    assert "ratelimit-limit" not in client.post("/api/echo", content=b"{}").headers


def test_hygiene_refuses_before_the_application(client: TestClient) -> None:
    declared = client.post("/api/echo", content=b"x" * 17, headers={"X-Request-Id": "big-1"})
    assert declared.status_code == 413 and declared.json()["code"] == "payload_too_large"
    assert declared.headers["x-request-id"] == "big-1"
    deep = client.post("/api/echo", content=b"[[[[1]]]]")
    assert deep.status_code == 400 and deep.json()["code"] == "json_too_deep"
    nul = client.post("/api/echo", content=b'{"a": "\\u0000"}')
    assert nul.status_code == 400 and nul.json()["code"] == "invalid_request"
    path = client.post("/v2/models/a%01b/infer")  # the shortcut's path too
    assert path.status_code == 400 and path.json()["code"] == "invalid_path"
    query = client.get("/api/echo?name=%00")
    assert query.status_code == 400 and query.json()["code"] == "invalid_request"


def test_a_body_refusal_the_application_wrapped_is_answered_as_the_refusal(
    client: TestClient,
) -> None:
    def chunks() -> Any:
        yield b"x" * 10
        yield b"x" * 10  # no Content-Length: counted while read

    answered = client.post("/api/wrapped", content=chunks())
    assert answered.status_code == 413
    assert answered.json()["code"] == "payload_too_large"


def test_errors_are_rendered_in_the_surfaces_format_and_a_bug_keeps_its_secrets(
    client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    bug = client.post("/api/bug", content=b"{}", headers={"X-Request-Id": "bug-3"})
    assert bug.status_code == 500
    assert bug.json()["code"] == "internal_error"
    assert bug.json()["detail"] == "internal error (request id bug-3)"
    assert "secret internals" not in bug.text
    assert bug.headers["x-request-id"] == "bug-3"
    assert any(r.exc_info for r in caplog.records)  # the traceback is logged
    missing = client.post("/v2/models/missing/infer")
    assert missing.status_code == 404
    assert missing.json() == {"error": "no such model", "code": "model_not_found"}
    assert client.post("/api/echo", content=b"{}").json() == {"size": 2}  # still serving
