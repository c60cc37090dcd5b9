"""A request with more rows than any backend of the version takes is 413
``payload_too_large`` naming the limit, before any work (the version is not even
loaded), on JSON and binary bodies alike: not a 503 that clients retry."""

from __future__ import annotations

import numpy as np
import orjson
from fastapi.testclient import TestClient

from modelport.app import Services
from tests.api_v2.conftest import Publisher

LIMIT = 1 << 20
"""The most rows this process's own backend takes in one request."""


def binary_body(rows: int) -> tuple[bytes, dict[str, str]]:
    x = np.zeros((rows, 4), np.float32)
    header = orjson.dumps(
        {
            "inputs": [
                {
                    "name": "x",
                    "datatype": "FP32",
                    "shape": [rows, 4],
                    "parameters": {"binary_data_size": x.nbytes},
                }
            ]
        }
    )
    return header + x.tobytes(), {"Inference-Header-Content-Length": str(len(header))}


def json_body(rows: int) -> tuple[bytes, dict[str, str]]:
    data = b"0," * (rows * 4 - 1) + b"0"
    head = b'{"inputs":[{"name":"x","datatype":"FP32","shape":[%d,4],"data":[' % rows
    return head + data + b"]}]}", {"Content-Type": "application/json"}


def test_more_rows_than_any_backend_takes_is_413_before_any_work(
    v2: tuple[TestClient, Services, Publisher],
) -> None:
    client, services, publisher = v2
    publisher.adder()
    assert services.host is not None
    for body, headers in (json_body(LIMIT + 1), binary_body(LIMIT + 1)):
        response = client.post("/v2/models/acme/adder/infer", content=body, headers=headers)
        assert response.status_code == 413, response.text[:500]
        doc = response.json()
        assert doc["code"] == "payload_too_large"
        assert f"{LIMIT + 1} rows" in doc["error"] and f"({LIMIT} rows)" in doc["error"]
    assert services.host.statuses() == []  # the version was not even loaded

    # A request the backend takes is answered as before.
    body, headers = binary_body(2)
    assert client.post("/v2/models/acme/adder/infer", content=body, headers=headers).is_success
