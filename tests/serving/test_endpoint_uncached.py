"""Endpoint calls are not answered from the response cache, even of a version declared
deterministic: an endpoint's canary, shadow and fallback steps judge live answers. The
same version called directly is."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from modelport.runtime.formats.onnx import OnnxModel
from tests.serving.conftest import Serving

V2_BODY = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1, 2, 3, 4]}]}


def count_executions(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    counted = [0]
    lock = threading.Lock()
    original = OnnxModel.execute

    def execute(model: OnnxModel, inputs: dict[str, Any]) -> Any:
        with lock:
            counted[0] += 1
        return original(model, inputs)

    monkeypatch.setattr(OnnxModel, "execute", execute)
    return counted


def test_endpoint_calls_run_the_model_every_time(
    serving: Serving, monkeypatch: pytest.MonkeyPatch
) -> None:
    ref = serving.publish("acme/det", "1", runtime={"deterministic": True})
    serving.endpoint("det")
    serving.deploy("det", [(ref, 100)])
    assert serving.predict("det").status_code == 200  # loaded and warm
    executions = count_executions(monkeypatch)
    for _ in range(2):
        answer = serving.predict("det")
        assert answer.status_code == 200, answer.text
        assert "modelport-cache" not in answer.headers
        as_model = serving.client.post("/v2/models/det/infer", json=V2_BODY)
        assert as_model.status_code == 200, as_model.text
        assert "modelport-cache" not in as_model.headers
    assert executions[0] == 4

    direct = [
        serving.client.post("/v2/models/acme/det/versions/1/infer", json=V2_BODY) for _ in range(2)
    ]
    assert [r.headers.get("modelport-cache") for r in direct] == ["miss", "hit"]
    assert executions[0] == 5
