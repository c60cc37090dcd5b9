"""The /v2 routes against real ONNX models published through the registry API."""

from __future__ import annotations

import json
import threading
import time

import httpx
import numpy as np
import onnxruntime as ort
import orjson
import pytest
from starlette.testclient import TestClient

from modelport.runtime.formats.onnx import OnnxModel
from tests.api_v2.conftest import V2Factory, infer_body
from tests.conftest import ADMIN_KEY, LiveServer
from tests.models import mlp

ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}


def metric(client: TestClient, name: str, **labels: str) -> float | None:
    text = client.get("/metrics").text
    wanted = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        if line.startswith(f"{name}{{{wanted}}} ") or (not labels and line.startswith(name + " ")):
            return float(line.rsplit(" ", 1)[1])
    return None


def test_health_is_open_and_everything_else_needs_the_key(v2) -> None:
    client, _, _ = v2
    anon = {"Authorization": ""}
    assert client.get("/v2/health/live", headers=anon).json() == {"live": True}
    assert client.get("/v2/health/ready", headers=anon).status_code == 200
    for method, path in [
        ("GET", "/v2"),
        ("GET", "/v2/models/acme/adder"),
        ("POST", "/v2/models/acme/adder/infer"),
        ("POST", "/v2/repository/index"),
        ("POST", "/v2/repository/models/acme/adder/load"),
    ]:
        response = client.request(method, path, headers=anon)
        assert response.status_code == 401, path
        assert "error" in response.json()
    assert client.get("/v2").json()["extensions"] == [
        "binary_tensor_data",
        "model_repository",
        "model_configuration",
        "statistics",
    ]


def test_json_inference_on_demand_with_and_without_a_version(v2) -> None:
    client, _, publisher = v2
    publisher.adder(version="1")
    x = np.array([[1, 2, 3, 4], [5, 6, 7, 8]], np.float32)
    response = client.post(
        "/v2/models/acme/adder/versions/1/infer", json=infer_body("x", x, id="r1")
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["model_name"] == "acme/adder" and body["model_version"] == "1"
    assert body["id"] == "r1"
    assert body["outputs"] == [
        {"name": "y", "datatype": "FP32", "shape": [2, 4], "data": (x + 1).ravel().tolist()}
    ]
    timing = response.headers["server-timing"]
    assert "queue;dur=" in timing and "compute;dur=" in timing and 'batch;desc="2"' in timing

    unversioned = client.post("/v2/models/acme/adder/infer", json=infer_body("x", x))
    assert unversioned.status_code == 200 and unversioned.json()["model_version"] == "1"
    labels = {"model": "acme/adder", "version": "1"}
    assert metric(client, "modelport_model_cold_starts_total", **labels) == 1
    assert metric(client, "modelport_inference_requests_total", outcome="success", **labels) == 2


def test_results_match_onnxruntime_called_directly(v2) -> None:
    client, _, publisher = v2
    publisher.mlp()
    features = np.random.default_rng(7).standard_normal((3, 8)).astype(np.float32)
    response = client.post("/v2/models/acme/mlp/infer", json=infer_body("features", features))
    assert response.status_code == 200, response.text
    (out,) = response.json()["outputs"]
    session = ort.InferenceSession(mlp().SerializeToString(), providers=["CPUExecutionProvider"])
    (expected,) = session.run(None, {"features": features})
    np.testing.assert_allclose(np.array(out["data"]).reshape(3, 3), expected, rtol=1e-6)


def test_binary_request_and_binary_response(v2) -> None:
    client, _, publisher = v2
    publisher.adder()
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    header = (
        b'{"inputs":[{"name":"x","datatype":"FP32","shape":[2,4],'
        b'"parameters":{"binary_data_size":32}}],'
        b'"outputs":[{"name":"y","parameters":{"binary_data":true}}]}'
    )
    response = client.post(
        "/v2/models/acme/adder/infer",
        content=header + x.tobytes(),
        headers={"Inference-Header-Content-Length": str(len(header))},
    )
    assert response.status_code == 200, response.text
    json_length = int(response.headers["inference-header-content-length"])
    doc = orjson.loads(response.content[:json_length])
    (out,) = doc["outputs"]
    assert out["parameters"]["binary_data_size"] == 32
    got = np.frombuffer(response.content[json_length:], dtype="<f4").reshape(2, 4)
    np.testing.assert_array_equal(got, x + 1)


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        (
            {"inputs": [{"name": "z", "datatype": "FP32", "shape": [1, 4], "data": [1, 2, 3, 4]}]},
            "'z'",
        ),
        (
            {"inputs": [{"name": "x", "datatype": "INT32", "shape": [1, 4], "data": [1, 2, 3, 4]}]},
            "expected datatype FP32",
        ),
        (
            {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 3], "data": [1, 2, 3]}]},
            "expected shape [-1, 4]",
        ),
        (
            {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1, 2, 3]}]},
            "needs 4 elements",
        ),
        (
            {
                "inputs": [
                    {"name": "x", "datatype": "FP32", "shape": [1, 4], "data": ["a", 2, 3, 4]}
                ]
            },
            "'x'",
        ),
        ({"inputs": []}, "inputs"),
        (
            {
                "inputs": [
                    {"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1, 2, 3, 4]}
                ],
                "outputs": [{"name": "nope"}],
            },
            "'nope'",
        ),
        (
            {
                "inputs": [
                    {"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1, 2, 3, 4]}
                ],
                "parameters": {"timeout": "soon"},
            },
            "timeout",
        ),
        (
            {
                "inputs": [
                    {"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1, 2, 3, 4]}
                ],
                "parameters": {"priority": "urgent"},
            },
            "priority",
        ),
    ],
)
def test_wrong_inputs_are_400_naming_what_was_expected(v2, body, needle) -> None:
    client, _, publisher = v2
    publisher.adder()
    response = client.post("/v2/models/acme/adder/infer", json=body)
    assert response.status_code == 400, response.text
    assert needle in response.json()["error"]


def test_invalid_requests_are_counted(v2) -> None:
    client, _, publisher = v2
    publisher.adder()
    bad = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 3], "data": [1, 2, 3]}]}
    assert client.post("/v2/models/acme/adder/infer", json=bad).status_code == 400
    labels = {"model": "acme/adder", "version": "1", "outcome": "invalid"}
    assert metric(client, "modelport_inference_requests_total", **labels) == 1


def test_priority_offline_is_queued_as_offline(v2) -> None:
    client, _, publisher = v2
    publisher.adder()
    body = {
        "inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1, 2, 3, 4]}],
        "parameters": {"priority": "offline"},
    }
    response = client.post("/v2/models/acme/adder/infer", json=body)
    assert response.status_code == 200, response.text
    assert response.json()["outputs"][0]["data"] == [2, 3, 4, 5]
    # Triton's integer levels: 3 and above are offline too.
    levelled = {**body, "parameters": {"priority": 3}}
    assert client.post("/v2/models/acme/adder/infer", json=levelled).status_code == 200
    assert client.post("/v2/models/acme/adder/infer", json={**body, "parameters": {}}).is_success
    name = "modelport_inference_queued_requests_total"
    labels = {"model": "acme/adder", "version": "1"}
    assert metric(client, name, priority="offline", **labels) == 2
    assert metric(client, name, priority="interactive", **labels) == 1
    assert metric(client, name, priority="batch", **labels) == 0


def test_a_body_over_the_limit_is_413(make_v2: V2Factory) -> None:
    client, _, publisher = make_v2(max_inference_request_bytes=1000)
    publisher.adder()
    x = np.zeros((100, 4), np.float32)
    body = json.dumps(infer_body("x", x)).encode()
    response = client.post(
        "/v2/models/acme/adder/infer",
        content=body,
        headers={"Content-Type": "application/json"},
    )
    assert response.status_code == 413
    # Refused on the declared length, before the body is read.
    assert response.json()["error"] == (
        f"request body of {len(body)} bytes is above the limit of 1000"
    )


@pytest.mark.parametrize(
    "path",
    [
        "/v2/models/acme/nothing/infer",
        "/v2/models/nobody/adder/infer",
        "/v2/models/acme/adder/versions/9/infer",
    ],
)
def test_unknown_models_and_versions_are_404(v2, path: str) -> None:
    client, _, publisher = v2
    publisher.adder()
    response = client.post(path, json=infer_body("x", np.zeros((1, 4), np.float32)))
    assert response.status_code == 404
    assert "error" in response.json()
    assert client.get(path.removesuffix("/infer")).status_code == 404


def test_an_expired_deadline_is_504_and_never_executed(v2) -> None:
    client, _, publisher = v2
    publisher.adder()
    x = np.zeros((1, 4), np.float32)
    assert client.post("/v2/models/acme/adder/infer", json=infer_body("x", x)).status_code == 200
    response = client.post(
        "/v2/models/acme/adder/infer", json=infer_body("x", x, parameters={"timeout": 1})
    )
    assert response.status_code == 504
    assert "deadline" in response.json()["error"]
    labels = {"model": "acme/adder", "version": "1"}
    assert metric(client, "modelport_inference_batch_size_count", **labels) == 1


def test_a_version_that_failed_to_load_is_503_with_its_cause(v2) -> None:
    client, services, publisher = v2
    manifest = publisher.adder()
    digest = manifest["files"][0]["digest"]
    blob = next(p for p in (services.settings.store.home / "blobs").rglob(digest.split(":")[1]))
    blob.write_bytes(b"not the model" + blob.read_bytes()[13:])
    x = np.zeros((1, 4), np.float32)
    response = client.post("/v2/models/acme/adder/infer", json=infer_body("x", x))
    assert response.status_code == 503
    assert "corrupted" in response.json()["error"]
    again = client.post("/v2/models/acme/adder/infer", json=infer_body("x", x))
    assert again.status_code == 503 and "failed to load" in again.json()["error"]
    (row,) = client.post("/v2/repository/index").json()
    assert row["state"] == "UNAVAILABLE" and "corrupted" in row["reason"]


def _gauge(url: str, name: str, model: str) -> float:
    prefix = f'{name}{{model="{model}",version="1"}} '
    lines = httpx.get(url + "/metrics", headers=ADMIN).text.splitlines()
    return float(next((x for x in lines if x.startswith(prefix)), prefix + "0").split()[-1])


def _wait_until(check, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.005)


def test_a_full_queue_is_429_with_retry_after(
    make_v2: V2Factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, services, publisher = make_v2(
        lifespan=False, runtime_max_queue_size=1, runtime_max_batch_size=1
    )
    publisher.slow(n=8)
    # Executions wait for the gate once the model is loaded: the queue stays full for as
    # long as the test needs, however loaded the machine is.
    gate, executing = threading.Event(), threading.Event()
    gated = threading.Event()
    execute = OnnxModel.execute

    def gated_execute(self: OnnxModel, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        if gated.is_set():
            executing.set()
            assert gate.wait(30), "the test never opened the gate"
        return execute(self, inputs)

    monkeypatch.setattr(OnnxModel, "execute", gated_execute)
    server = LiveServer(services).start()
    statuses: list[int] = []
    threads: list[threading.Thread] = []
    try:
        headers = {"Authorization": publisher.client.headers["Authorization"]}
        body = infer_body("x", np.zeros((1, 4), np.float32))
        with httpx.Client(base_url=server.url, headers=headers, timeout=30) as http:
            assert http.post("/v2/repository/models/acme/slow/load").status_code == 200
        gated.set()

        def call() -> None:
            with httpx.Client(base_url=server.url, headers=headers, timeout=30) as http:
                statuses.append(http.post("/v2/models/acme/slow/infer", json=body).status_code)

        # The first request executes (held at the gate); the second waits in the queue
        # of one.
        threads = [threading.Thread(target=call) for _ in range(2)]
        threads[0].start()
        assert executing.wait(30), "the first request never reached the model"
        threads[1].start()
        depth = "modelport_inference_queue_depth"
        _wait_until(lambda: _gauge(server.url, depth, "acme/slow") == 1)
        with httpx.Client(base_url=server.url, headers=headers, timeout=30) as http:
            response = http.post("/v2/models/acme/slow/infer", json=body)
    finally:
        gate.set()
        for thread in threads:
            thread.join(30)
        server.stop()
    assert response.status_code == 429, response.text
    assert int(response.headers["retry-after"]) >= 1
    assert "overloaded" in response.json()["error"]
    assert statuses == [200, 200]


def test_concurrent_http_requests_are_batched(live_v2, monkeypatch: pytest.MonkeyPatch) -> None:
    url, publisher = live_v2
    publisher.slow(n=8, resources={"max_batch_size": 64})
    # The first execution waits at the gate until every other request is queued behind
    # it: they must then share executions, however slowly a loaded machine sends them.
    gate, executing, gated = threading.Event(), threading.Event(), threading.Event()
    execute = OnnxModel.execute

    def gated_execute(self: OnnxModel, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        if gated.is_set() and not executing.is_set():
            executing.set()
            assert gate.wait(30), "the test never opened the gate"
        return execute(self, inputs)

    monkeypatch.setattr(OnnxModel, "execute", gated_execute)
    rows = np.arange(24 * 4, dtype=np.float32).reshape(24, 4)
    headers = {"Authorization": publisher.client.headers["Authorization"]}
    with httpx.Client(base_url=url, headers=headers, timeout=30) as http:
        assert http.post("/v2/repository/models/acme/slow/load").status_code == 200
    gated.set()
    results: dict[int, tuple[list[float], str]] = {}

    def call(i: int) -> None:
        with httpx.Client(base_url=url, headers=headers, timeout=60) as http:
            response = http.post(
                "/v2/models/acme/slow/infer", json=infer_body("x", rows[i : i + 1])
            )
            assert response.status_code == 200
            results[i] = (response.json()["outputs"][0]["data"], response.headers["server-timing"])

    threads = [threading.Thread(target=call, args=(i,)) for i in range(len(rows))]
    try:
        threads[0].start()
        assert executing.wait(30), "the first request never reached the model"
        for thread in threads[1:]:
            thread.start()
        depth = "modelport_inference_queue_depth"
        _wait_until(lambda: _gauge(url, depth, "acme/slow") == len(rows) - 1)
    finally:
        gate.set()
        for thread in threads:
            if thread.ident is not None:  # started
                thread.join(60)
    for i in range(len(rows)):
        assert results[i][0] == rows[i].tolist()  # each caller got its own row back
    assert any('batch;desc="1"' not in timing for _, timing in results.values())
    count = _gauge(url, "modelport_inference_batch_size_count", "acme/slow")
    assert _gauge(url, "modelport_inference_batch_size_sum", "acme/slow") == len(rows)
    assert count <= len(rows) / 2  # requests shared executions


def test_a_caller_that_leaves_mid_body_gets_no_error_logged(v2) -> None:
    client, _, publisher = v2
    publisher.adder()
    sent: list[dict] = []
    messages = [
        {"type": "http.request", "body": b'{"inputs": [', "more_body": True},
        {"type": "http.disconnect"},
    ]

    async def receive() -> dict:
        return messages.pop(0)

    async def send(message: dict) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v2/models/acme/adder/infer",
        "raw_path": b"/v2/models/acme/adder/infer",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"authorization", client.headers["Authorization"].encode())],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
    }
    client.portal.call(client.app, scope, receive, send)  # raises if the route did
    assert sent[0]["status"] == 499


def test_nan_and_infinity_literals_are_read_and_written_as_triton_does(v2) -> None:
    client, _, publisher = v2
    publisher.adder()
    body = (
        b'{"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4],'
        b' "data": [NaN, Infinity, -Infinity, 1]}]}'
    )
    answered = client.post("/v2/models/acme/adder/infer", content=body)
    assert answered.status_code == 200, answered.text
    assert b'"data":[NaN,Infinity,-Infinity,2.0]' in answered.content  # never null
    # Only the literals JSON writers produce: rapidjson's "Inf" shorthand is refused.
    shorthand = client.post(
        "/v2/models/acme/adder/infer", content=body.replace(b"Infinity", b"Inf")
    )
    assert shorthand.status_code == 400 and shorthand.json()["code"] == "invalid_json"
