"""The model repository extension, readiness and metadata on /v2."""

from __future__ import annotations

import numpy as np
from starlette.testclient import TestClient

from tests.api_v2.conftest import V2Factory, infer_body


def test_load_index_ready_and_unload(v2) -> None:
    client, _, publisher = v2
    publisher.adder(version="1")
    publisher.adder(version="2")
    assert client.post("/v2/repository/index").json() == []
    assert client.get("/v2/models/acme/adder/ready").status_code == 503

    loaded = client.post(
        "/v2/repository/models/acme/adder/load", json={"parameters": {"version": "1"}}
    )
    assert loaded.status_code == 200, loaded.text
    body = loaded.json()
    assert body["state"] == "READY" and body["version"] == "1"
    assert set(body["phases"]) == {"fetch", "verify", "load", "warmup"}
    assert "matched" in body["warm_up"]
    assert client.get("/v2/models/acme/adder/versions/1/ready").json()["ready"] is True
    assert client.get("/v2/models/acme/adder/versions/2/ready").status_code == 503

    assert client.post("/v2/repository/models/acme/adder/load").status_code == 200  # default: 2
    index = client.post("/v2/repository/index", json={}).json()
    assert index == [
        {"name": "acme/adder", "version": "1", "state": "READY", "reason": ""},
        {"name": "acme/adder", "version": "2", "state": "READY", "reason": ""},
    ]

    one = client.post(
        "/v2/repository/models/acme/adder/unload", json={"parameters": {"version": "1"}}
    )
    assert one.json() == {"unloaded": [{"name": "acme/adder", "version": "1"}]}
    assert [r["version"] for r in client.post("/v2/repository/index").json()] == ["2"]
    every = client.post("/v2/repository/models/acme/adder/unload")
    assert every.json() == {"unloaded": [{"name": "acme/adder", "version": "2"}]}
    assert client.post("/v2/repository/index").json() == []
    nothing = client.post("/v2/repository/models/acme/adder/unload")
    assert nothing.status_code == 404


def test_without_load_on_demand_only_loaded_versions_serve(make_v2: V2Factory) -> None:
    client, _, publisher = make_v2(load_on_demand=False)
    publisher.adder()
    body = infer_body("x", np.zeros((1, 4), np.float32))
    refused = client.post("/v2/models/acme/adder/infer", json=body)
    assert refused.status_code == 503 and "not loaded" in refused.json()["error"]
    assert refused.json()["code"] == "model_not_loaded"
    not_ready = client.get("/v2/models/acme/adder/versions/1/ready")
    assert not_ready.status_code == 503 and not_ready.json()["code"] == "model_not_ready"
    assert client.post("/v2/repository/models/acme/adder/load").status_code == 200
    assert client.post("/v2/models/acme/adder/infer", json=body).status_code == 200
    client.post("/v2/repository/models/acme/adder/unload")
    assert client.post("/v2/models/acme/adder/infer", json=body).status_code == 503


def test_memory_budget_refuses_and_evicts(make_v2: V2Factory) -> None:
    # Each adder declares 6 MB; the budget holds one (loads measure more, never less).
    client, _, publisher = make_v2(runtime_memory_budget_bytes=10 << 20)
    declared = {"resources": {"host_memory_bytes": 6 << 20, "max_batch_size": 8}}
    publisher.adder("acme/a", **declared)
    publisher.adder("acme/b", **declared)
    publisher.adder("acme/big", resources={"host_memory_bytes": 64 << 20})
    body = infer_body("x", np.zeros((1, 4), np.float32))
    assert client.post("/v2/models/acme/a/infer", json=body).status_code == 200
    assert client.post("/v2/models/acme/b/infer", json=body).status_code == 200
    index = client.post("/v2/repository/index").json()
    assert [r["name"] for r in index] == ["acme/b"]  # a was idle and made room
    refused = client.post("/v2/models/acme/big/infer", json=body)
    assert refused.status_code == 503
    assert "not enough host memory" in refused.json()["error"]
    assert [r["name"] for r in client.post("/v2/repository/index").json()] == ["acme/b"]


def test_pinned_versions_are_not_evicted(make_v2: V2Factory) -> None:
    client, _, publisher = make_v2(runtime_memory_budget_bytes=10 << 20)
    declared = {"resources": {"host_memory_bytes": 6 << 20}}
    publisher.adder("acme/a", **declared)
    publisher.adder("acme/b", **declared)
    pinned = client.post("/v2/repository/models/acme/a/load", json={"parameters": {"pinned": True}})
    assert pinned.status_code == 200
    refused = client.post("/v2/repository/models/acme/b/load")
    assert refused.status_code == 503 and "acme/a:1" in refused.json()["error"]


def test_load_refuses_triton_model_configs(v2) -> None:
    client, _, publisher = v2
    publisher.adder()
    response = client.post(
        "/v2/repository/models/acme/adder/load", json={"parameters": {"config": "{}"}}
    )
    assert response.status_code == 400
    assert "not supported" in response.json()["error"]


def test_model_metadata_with_and_without_a_version(v2) -> None:
    client: TestClient
    client, _, publisher = v2
    publisher.adder(version="1")
    publisher.adder(version="2")
    doc = client.get("/v2/models/acme/adder").json()
    assert doc == {
        "name": "acme/adder",
        "versions": ["1", "2"],
        "platform": "onnx",
        "inputs": [{"name": "x", "datatype": "FP32", "shape": [-1, 4]}],
        "outputs": [{"name": "y", "datatype": "FP32", "shape": [-1, 4]}],
    }
    assert client.get("/v2/models/acme/adder/versions/1").json()["versions"] == ["1"]


def test_an_alias_names_a_version_in_the_path(v2) -> None:
    client, _, publisher = v2
    publisher.adder(version="1")
    publisher.adder(version="2")
    assert client.put(
        "/api/models/acme/adder/aliases/stable", json={"version": "1"}
    ).status_code in (
        200,
        201,
    )
    body = infer_body("x", np.zeros((1, 4), np.float32))
    response = client.post("/v2/models/acme/adder/versions/stable/infer", json=body)
    assert response.status_code == 200 and response.json()["model_version"] == "1"
