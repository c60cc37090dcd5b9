"""Request hygiene: oversized bodies refused early, deep JSON, tensor elements, decompression."""

from __future__ import annotations

import asyncio
import gzip
from typing import Any

import orjson
import pytest

from modelport.api import create_app
from modelport.api.hygiene import check_json_depth, json_depth
from modelport.errors import InvalidInput
from tests.conftest import ADMIN_KEY, ensure_tenant
from tests.limits.conftest import ADDER_BODY, Platform, PlatformFactory

LIMIT = 4096


@pytest.mark.parametrize(
    ("text", "depth"),
    [
        (b"1", 0),
        (b'"[[["', 0),
        (b"[]", 1),
        (b'{"a": [1, {"b": [2]}]}', 4),
        (b'{"a": "[[[[{{{{"}', 1),
        (rb'["\"[[[", "\\", ["x"]]', 2),
        (b"[" * 3000 + b"]" * 3000, 3000),
        (b"[[1],[2],[3]]" * 1000, 2),
    ],
)
def test_json_depth(text: bytes, depth: int) -> None:
    assert json_depth(text) == depth


def test_check_json_depth_names_the_limit() -> None:
    check_json_depth(b"[[[]]]", 3)
    with pytest.raises(InvalidInput) as info:
        check_json_depth(b"[[[[]]]]", 3)
    assert info.value.code == "json_too_deep"
    assert "4 levels deep, above the limit of 3" in info.value.message


@pytest.fixture
def small(make_platform: PlatformFactory) -> Platform:
    platform = make_platform(
        max_api_body_bytes=LIMIT,
        max_inference_request_bytes=LIMIT * 4,
        max_json_depth=8,
        max_tensor_elements=8,
        max_decompressed_request_bytes=LIMIT * 4,
        max_chunk_bytes=LIMIT * 16,
    )
    platform.publisher.adder()
    return platform


def call_asgi(app: Any, method: str, path: str, headers: dict[str, str], chunks: list[bytes]):
    """Drive the ASGI app directly; returns (status, body, chunks the app read)."""
    sent: list[dict[str, Any]] = []
    reads = 0

    async def receive() -> dict[str, Any]:
        nonlocal reads
        reads += 1
        if reads > len(chunks):
            return {"type": "http.disconnect"}
        return {
            "type": "http.request",
            "body": chunks[reads - 1],
            "more_body": reads < len(chunks),
        }

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
        "state": {},
    }
    asyncio.run(app(scope, receive, send))
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return status, orjson.loads(body), reads


AUTH = {"authorization": f"Bearer {ADMIN_KEY}"}


def test_declared_length_over_the_limit_is_refused_without_reading(small: Platform) -> None:
    app = create_app(small.services)
    headers = {**AUTH, "content-type": "application/json", "content-length": str(10**9)}
    status, body, reads = call_asgi(app, "POST", "/api/models", headers, [b"{}"])
    assert status == 413
    assert body["code"] == "payload_too_large" and body["max_bytes"] == LIMIT
    assert reads == 0
    status, body, reads = call_asgi(app, "POST", "/v2/models/acme/adder/infer", headers, [b"{}"])
    assert (status, reads) == (413, 0)
    assert "above the limit" in body["error"] and body["code"] == "payload_too_large"


def test_streamed_body_is_cut_off_once_past_the_limit(small: Platform) -> None:
    app = create_app(small.services)
    headers = {**AUTH, "content-type": "application/json"}
    chunks = [b" " * 1024] * 100  # 100 KiB, no Content-Length
    status, body, reads = call_asgi(app, "POST", "/api/models", headers, chunks)
    assert status == 413 and body["code"] == "payload_too_large"
    assert reads == LIMIT // 1024 + 1  # it stopped at the first chunk past the limit


def test_chunked_request_over_the_limit_through_http(small: Platform) -> None:
    def body():
        yield b'{"owner": "acme", "name": "x", "description": "'
        for _ in range(10):
            yield b"a" * 1000
        yield b'"}'

    response = small.client.post(
        "/api/models", content=body(), headers={"content-type": "application/json"}
    )
    assert response.status_code == 413
    assert response.json()["code"] == "payload_too_large"
    assert small.client.get("/api/models/acme/x").status_code == 404


def test_api_body_within_the_limit_is_served(small: Platform) -> None:
    ensure_tenant(small.client, "acme")
    response = small.client.post(
        "/api/models", json={"owner": "acme", "name": "fine", "description": "d" * 1000}
    )
    assert response.status_code == 201, response.text


def test_deep_json_is_refused_on_api(small: Platform) -> None:
    deep = {"owner": "acme", "name": "deep", "tags": [[[[[[[[["x"]]]]]]]]]}
    response = small.client.post("/api/models", json=deep)
    assert response.status_code == 400
    assert response.json()["code"] == "json_too_deep"
    assert small.client.get("/api/models/acme/deep").status_code == 404


def test_deep_json_is_refused_on_v2(small: Platform) -> None:
    body = {**ADDER_BODY, "parameters": {"x": [[[[[[[[[1]]]]]]]]]}}
    response = small.client.post("/v2/models/acme/adder/infer", json=body)
    assert response.status_code == 400
    assert "nested 11 levels deep" in response.json()["error"]


def test_binary_request_checks_only_its_json_header(small: Platform) -> None:
    header = orjson.dumps(
        {
            "inputs": [
                {
                    "name": "x",
                    "datatype": "FP32",
                    "shape": [1, 4],
                    "parameters": {"binary_data_size": 16},
                }
            ]
        }
    )
    data = b"[[[[" * 4  # bracket bytes in tensor data are not JSON
    response = small.client.post(
        "/v2/models/acme/adder/infer",
        content=header + data,
        headers={
            "Inference-Header-Content-Length": str(len(header)),
            "content-type": "application/octet-stream",
        },
    )
    assert response.status_code == 200, response.text


def test_compressed_deep_json_is_checked_after_decompression(small: Platform) -> None:
    body = orjson.dumps({**ADDER_BODY, "parameters": {"x": [[[[[[[[[1]]]]]]]]]}})
    response = small.client.post(
        "/v2/models/acme/adder/infer",
        content=gzip.compress(body),
        headers={"content-encoding": "gzip", "content-type": "application/json"},
    )
    assert response.status_code == 400
    assert "levels deep" in response.json()["error"]


def test_tensor_elements_limit_comes_from_settings(small: Platform) -> None:
    body = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [3, 4], "data": [0.0] * 12}]}
    response = small.client.post("/v2/models/acme/adder/infer", json=body)
    assert response.status_code == 400
    assert "above the limit of 8" in response.json()["error"]
    assert small.client.post("/v2/models/acme/adder/infer", json=ADDER_BODY).status_code == 200


def test_decompressed_size_limit_comes_from_settings(small: Platform) -> None:
    padded = orjson.dumps({**ADDER_BODY, "id": "p" * (LIMIT * 8)})
    bomb = gzip.compress(padded)
    assert len(bomb) < LIMIT  # small on the wire
    response = small.client.post(
        "/v2/models/acme/adder/infer",
        content=bomb,
        headers={"content-encoding": "gzip", "content-type": "application/json"},
    )
    assert response.status_code == 400
    assert f"larger than {LIMIT * 4} bytes" in response.json()["error"]


def test_upload_chunks_are_not_held_to_the_api_body_limit(small: Platform) -> None:
    started = small.client.post("/api/uploads")
    assert started.status_code == 202, started.text
    location = started.headers["Location"]
    chunk = b"z" * (LIMIT * 3)
    response = small.client.patch(
        location,
        content=chunk,
        headers={
            "Content-Range": f"0-{len(chunk) - 1}",
            "content-type": "application/octet-stream",
        },
    )
    assert response.status_code == 202, response.text


@pytest.mark.parametrize(
    "path",
    ["/api/models/acme/%00/versions/1", "/api/models/acme%0Abad", "/v2/models/a/b%7F/infer"],
)
def test_control_characters_in_the_path_are_400(client: Any, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 400
    assert "control characters" in response.text
