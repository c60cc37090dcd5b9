"""Endpoints on ``/v2``: an endpoint's name (one segment) is a model name there, so Open
Inference Protocol clients get its canary, fallbacks and prediction log; and ``/v2``
model calls go through the serving layer's dispatcher like endpoint calls."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pytest

from tests.conftest import ThreadedServer
from tests.serving.conftest import ROW, Serving, add_constant, failing

BODY = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": ROW[0]}]}


@pytest.fixture
def canary(serving: Serving) -> Serving:
    """Endpoint ``fraud``: acme/fraud:1 (adds 1) and :2 (adds 2), half the traffic each."""
    v1 = serving.publish("acme/fraud", "1")
    v2 = serving.publish("acme/fraud", "2", model=add_constant(2.0))
    serving.endpoint("fraud")
    serving.deploy("fraud", [(v1, 50), (v2, 50)])
    return serving


def test_an_endpoint_answers_as_a_v2_model_with_its_canary_weights(canary: Serving) -> None:
    answers: Counter[str] = Counter()
    for _ in range(40):
        response = canary.client.post("/v2/models/fraud/infer", json=BODY)
        assert response.status_code == 200, response.text
        doc = response.json()
        assert doc["model_name"] == "fraud"
        added = doc["outputs"][0]["data"][0] - ROW[0][0]
        assert doc["model_version"] == {1: "acme/fraud:1", 2: "acme/fraud:2"}[round(added)]
        answers[doc["model_version"]] += 1
    assert set(answers) == {"acme/fraud:1", "acme/fraud:2"}
    # Metered as endpoint calls, under the version that answered.
    canary.services.metering.deliver()
    events = [
        e.event for e in canary.services.metering.ledger.entries() if e.event.unit == "prediction"
    ]
    assert {e.endpoint for e in events} == {"fraud"}
    assert Counter(f"acme/fraud:{e.version}" for e in events) == answers


def test_a_v2_endpoint_call_is_in_the_prediction_log(canary: Serving, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    records: list[Any] = []
    monkeypatch.setattr(canary.services.prediction_log, "record", records.append)
    response = canary.client.post(
        "/v2/models/fraud/infer", json=BODY, headers={"X-Request-Id": "req-v2"}
    )
    assert response.status_code == 200
    [record] = records
    assert (record.endpoint, record.status, record.request_id) == ("fraud", "ok", "req-v2")
    assert f"{record.model}:{record.version}" == response.json()["model_version"]


def test_a_v2_endpoint_call_gets_the_fallback(serving: Serving) -> None:
    serving.publish("acme/fraud", "2", model=failing())
    serving.publish("acme/fraud", "3", model=add_constant(3.0))
    chain = {"steps": [{"kind": "version", "model": "acme/fraud", "version": "3"}]}
    serving.endpoint("fraud", fallback=chain)
    serving.deploy("fraud", [("acme/fraud:2", 100)])
    response = serving.client.post("/v2/models/fraud/infer", json=BODY)
    assert response.status_code == 200, response.text
    assert response.json()["model_version"] == "acme/fraud:3"


def test_metadata_and_readiness_come_from_the_active_deployment(canary: Serving) -> None:
    metadata = canary.client.get("/v2/models/fraud")
    assert metadata.status_code == 200, metadata.text
    doc = metadata.json()
    assert doc["name"] == "fraud" and doc["versions"] == ["acme/fraud:1"]
    assert doc["inputs"] == [{"name": "x", "datatype": "FP32", "shape": [-1, 4]}]
    ready = canary.client.get("/v2/models/fraud/ready")
    assert ready.status_code == 200 and ready.json()["ready"] is True


def test_an_endpoint_without_a_deployment_is_not_ready(serving: Serving) -> None:
    serving.endpoint("idle")
    response = serving.client.get("/v2/models/idle/ready")
    assert response.status_code == 503
    assert response.json()["code"] == "no_active_deployment"


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/v2/models/iris-rf/infer"),
        ("GET", "/v2/models/iris-rf"),
        ("GET", "/v2/models/iris-rf/ready"),
    ],
)
def test_a_name_that_is_neither_an_endpoint_nor_owner_name_is_a_404_naming_both(
    serving: Serving, method: str, path: str
) -> None:
    response = serving.client.request(method, path, json=BODY if method == "POST" else None)
    assert response.status_code == 404, response.text
    doc = response.json()
    assert doc["code"] == "model_not_found"
    assert "owner/name" in doc["error"] and "endpoint" in doc["error"]


def test_another_tenants_endpoint_is_the_same_404(canary: Serving) -> None:
    canary.ensure_tenant("globex")
    tenancy = canary.services.tenancy
    tenancy.add_member("globex", "app", roles=["consumer"], actor="admin")
    key = tenancy.create_key("globex", "app", name="k", actor="admin")
    response = canary.client.post(
        "/v2/models/fraud/infer", json=BODY, headers={"Authorization": f"Bearer {key.secret}"}
    )
    assert response.status_code == 404
    assert response.json()["code"] == "model_not_found"


def test_a_v2_model_call_runs_through_the_dispatcher(serving: Serving) -> None:
    """Its attempts are counted on the version's local backend, as endpoint calls are,
    and its breaker is the one endpoint calls of that version share."""
    serving.publish("acme/fraud", "1")
    response = serving.client.post("/v2/models/acme/fraud/versions/1/infer", json=BODY)
    assert response.status_code == 200, response.text
    metrics = serving.client.get("/metrics").text
    assert 'modelport_serving_attempts_total{backend="local:acme/fraud:1",outcome="ok"} 1.0' in (
        metrics
    )
    board = serving.services.health.board
    assert board.breaker("local:acme/fraud:1").snapshot().state.value == "closed"


def test_a_failing_version_opens_the_breaker_that_v2_and_endpoint_calls_share(
    serving: Serving,
) -> None:
    serving.publish("acme/fraud", "1", model=failing())
    for _ in range(30):
        serving.client.post("/v2/models/acme/fraud/versions/1/infer", json=BODY)
    attempts = serving.client.get("/metrics").text
    assert 'backend="local:acme/fraud:1",outcome="failed"' in attempts


def test_breakers_count_their_window_and_cool_down_on_the_services_clock(
    serving: Serving,
) -> None:
    """However long the test takes, an open breaker keeps its backend off until the
    services' clock has passed the cool-down (10 s by default); then it lets a trial
    through, and failures older than the window (30 s) no longer count."""
    breaker = serving.services.health.board.breaker("remote:flaky")
    for _ in range(5):
        breaker.on_failure()
    assert breaker.snapshot().state.value == "open"
    assert breaker.snapshot().retry_after == 10.0
    serving.clock.advance(9.5)
    assert not breaker.try_acquire()
    serving.clock.advance(0.5)
    assert breaker.try_acquire()  # the half-open trial
    breaker.on_success()
    assert breaker.snapshot().state.value == "closed"

    for _ in range(4):
        breaker.on_failure()
    serving.clock.advance(31)  # those four leave the window
    breaker.on_failure()
    assert breaker.snapshot().state.value == "closed"
    assert breaker.snapshot().failures == 1


def _x(rows: int) -> np.ndarray:
    return np.arange(rows * 4, dtype=np.float32).reshape(rows, 4)


def test_tritonclient_calls_an_endpoint_by_its_name(canary: Serving) -> None:
    tritonclient = pytest.importorskip("tritonclient.http")
    # A second server on the same services, without a lifespan of its own: the test
    # client's already runs the controller.
    # The test client runs the application's lifespan already.
    server = ThreadedServer(canary.client.app, lifespan="off").start()
    try:
        client = tritonclient.InferenceServerClient(url=server.url.removeprefix("http://"))
        auth = dict(canary.client.headers)
        headers = {"Authorization": auth["authorization"]}
        assert client.is_model_ready("fraud", headers=dict(headers))
        metadata = client.get_model_metadata("fraud", headers=dict(headers))
        assert metadata["name"] == "fraud"
        seen = set()
        for binary in (False, True) * 10:
            tensor = tritonclient.InferInput("x", [3, 4], "FP32")
            tensor.set_data_from_numpy(_x(3), binary_data=binary)
            wanted = tritonclient.InferRequestedOutput("y", binary_data=binary)
            result = client.infer("fraud", [tensor], outputs=[wanted], headers=dict(headers))
            added = result.as_numpy("y") - _x(3)
            assert np.all(added == added[0, 0])
            seen.add((result.get_response()["model_version"], float(added[0, 0])))
        assert seen == {("acme/fraud:1", 1.0), ("acme/fraud:2", 2.0)}
        client.close()
    finally:
        server.stop()
