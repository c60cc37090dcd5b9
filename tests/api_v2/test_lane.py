"""The envelope routes /v2 infer calls straight to their route, past FastAPI's
middleware and router, with the same request ids, refusals, error format and headers
as every other request."""

from __future__ import annotations

import numpy as np
import pytest
from starlette.middleware.errors import ServerErrorMiddleware
from starlette.routing import Router

from modelport.api.v2.lane import infer_path_params
from modelport.tenancy.limits import ScopeType
from tests.api_v2.conftest import infer_body


@pytest.mark.parametrize(
    ("path", "params"),
    [
        ("/v2/models/acme/mlp/infer", {"owner": "acme", "name": "mlp"}),
        (
            "/v2/models/acme/mlp/versions/3/infer",
            {"owner": "acme", "name": "mlp", "version": "3"},
        ),
        ("/v2/models/fraud/infer", {"name": "fraud"}),  # an endpoint, by its name alone
        ("/v2/models/acme/mlp/versions/3/extra/infer", None),
        ("/v2/models/acme/mlp/ready", None),
        ("/v2/models/acme/mlp/versions//infer", None),
        ("/api/models/acme/mlp/infer", None),
    ],
)
def test_only_the_infer_paths_take_the_lane(path: str, params: dict | None) -> None:
    assert infer_path_params(path) == params


def _count_calls(monkeypatch: pytest.MonkeyPatch, middleware: type = Router) -> list[str]:
    seen: list[str] = []
    original = middleware.__call__

    async def counting(self, scope, receive, send):  # type: ignore[no-untyped-def]
        if scope["type"] == "http":
            seen.append(scope["path"])
        await original(self, scope, receive, send)

    monkeypatch.setattr(middleware, "__call__", counting)
    return seen


def test_infer_calls_skip_the_stack_and_keep_the_request_id(v2, monkeypatch) -> None:
    client, _, publisher = v2
    publisher.adder()
    seen = _count_calls(monkeypatch)
    body = infer_body("x", np.ones((1, 4), np.float32))
    answered = client.post(
        "/v2/models/acme/adder/infer", json=body, headers={"X-Request-Id": "trace-42"}
    )
    assert answered.status_code == 200, answered.text
    assert answered.headers["x-request-id"] == "trace-42"
    assert answered.json()["outputs"][0]["data"] == [2.0, 2.0, 2.0, 2.0]
    made = client.post("/v2/models/acme/adder/versions/1/infer", json=body)
    assert made.status_code == 200 and made.headers["x-request-id"]
    assert seen == []  # routed past the router, both
    assert client.get("/v2/models/acme/adder").status_code == 200
    assert set(seen) == {"/v2/models/acme/adder"}  # everything else goes through the router


def test_infer_calls_skip_the_middlewares_fastapi_installs_itself(v2, monkeypatch) -> None:
    # The lane sits in front of the whole stack, Starlette's error middleware included,
    # not merely in front of the user's middlewares.
    client, _, publisher = v2
    publisher.adder()
    seen = _count_calls(monkeypatch, ServerErrorMiddleware)
    body = infer_body("x", np.ones((1, 4), np.float32))
    assert client.post("/v2/models/acme/adder/infer", json=body).status_code == 200
    assert seen == []
    assert client.get("/v2/models/acme/adder").status_code == 200
    assert seen == ["/v2/models/acme/adder"]


def test_refusals_in_the_lane_use_the_v2_error_format(v2) -> None:
    client, _, publisher = v2
    publisher.adder()
    deep = b'{"inputs": ' + b"[" * 200 + b"]" * 200 + b"}"
    refused = client.post(
        "/v2/models/acme/adder/infer",
        content=deep,
        headers={"Content-Type": "application/json", "X-Request-Id": "deep-1"},
    )
    assert refused.status_code == 400
    assert "nested" in refused.json()["error"]
    assert refused.headers["x-request-id"] == "deep-1"
    unauthenticated = client.post(
        "/v2/models/acme/adder/infer",
        json=infer_body("x", np.ones((1, 4), np.float32)),
        headers={"Authorization": "Bearer nope"},
    )
    assert unauthenticated.status_code == 401
    assert unauthenticated.headers["www-authenticate"].startswith("Bearer")
    assert set(unauthenticated.json()) == {"error", "code"}
    assert unauthenticated.json()["code"] == "invalid_credentials"


def test_a_bug_in_the_lane_is_a_500_with_the_request_id_only(v2, monkeypatch, caplog) -> None:
    client, _, publisher = v2
    publisher.adder()

    async def broken(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise RuntimeError("secret internals")

    monkeypatch.setattr(client.app.state.services.inference.dispatcher, "dispatch", broken)
    answered = client.post(
        "/v2/models/acme/adder/infer",
        json=infer_body("x", np.ones((1, 4), np.float32)),
        headers={"X-Request-Id": "bug-7"},
    )
    assert answered.status_code == 500
    assert answered.json() == {
        "error": "internal error (request id bug-7)",
        "code": "internal_error",
    }
    assert "secret internals" not in answered.text
    assert any("bug-7" in record.getMessage() for record in caplog.records)


def test_a_control_character_in_an_infer_path_is_refused(v2) -> None:
    client, _, _ = v2
    answered = client.post("/v2/models/acme/ad%00der/infer", json={})
    assert answered.status_code == 400
    assert "control characters" in answered.json()["error"]


def test_lane_answers_carry_the_rate_limit_they_were_charged_to(v2) -> None:
    client, services, publisher = v2
    publisher.adder()
    services.limits.set_limits(
        ScopeType.TENANT, "admin", tenant=None, rpm=2, concurrency=None, tpm=None, actor="test"
    )
    body = infer_body("x", np.ones((1, 4), np.float32))
    first = client.post("/v2/models/acme/adder/infer", json=body)
    assert first.status_code == 200
    assert first.headers["ratelimit-limit"] == "2"
    assert first.headers["ratelimit-remaining"] == "1"
    client.post("/v2/models/acme/adder/infer", json=body)
    refused = client.post("/v2/models/acme/adder/infer", json=body)
    assert refused.status_code == 429
    assert refused.headers["ratelimit-remaining"] == "0"
    assert int(refused.headers["retry-after"]) >= 1
