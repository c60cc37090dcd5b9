"""/api/blobs: streaming, ranges, HEAD, and never serving corrupted bytes."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.testclient import TestClient

from modelport.api import create_app
from modelport.app import Services, build_services
from modelport.blobs.local import LocalBlobStore
from modelport.config import Settings
from tests.blobs.support import digest_of
from tests.conftest import ADMIN_KEY, LiveServer

DATA = bytes(range(10))


def upload(client: TestClient, data: bytes) -> str:
    response = client.post(f"/api/uploads?digest={digest_of(data)}", content=data)
    assert response.status_code == 201, response.text
    return digest_of(data)


def flip_byte(services: Services, digest: str, at: int = 0) -> None:
    store = services.blob_store
    assert isinstance(store, LocalBlobStore)
    path = store.path(digest)
    raw = bytearray(path.read_bytes())
    raw[at] ^= 0xFF
    path.write_bytes(bytes(raw))


class TestReads:
    def test_get_streams_the_blob_and_head_tells_its_size(self, client: TestClient) -> None:
        digest = upload(client, DATA)
        response = client.get(f"/api/blobs/{digest}")
        assert response.status_code == 200
        assert response.content == DATA
        assert response.headers["blob-digest"] == digest
        assert response.headers["content-type"] == "application/octet-stream"
        head = client.head(f"/api/blobs/{digest}")
        assert head.status_code == 200
        assert head.headers["content-length"] == "10"
        assert head.headers["blob-digest"] == digest
        assert head.headers["accept-ranges"] == "bytes"
        assert head.content == b""

    @pytest.mark.parametrize(
        ("header", "start", "end"),
        [("bytes=0-4", 0, 5), ("bytes=5-", 5, 10), ("bytes=-3", 7, 10), ("bytes=2-1000", 2, 10)],
    )
    def test_a_range_gets_206(self, client: TestClient, header: str, start: int, end: int) -> None:
        digest = upload(client, DATA)
        response = client.get(f"/api/blobs/{digest}", headers={"Range": header})
        assert response.status_code == 206
        assert response.content == DATA[start:end]
        assert response.headers["content-range"] == f"bytes {start}-{end - 1}/10"
        assert response.headers["content-length"] == str(end - start)

    @pytest.mark.parametrize("header", ["bytes=10-", "bytes=50-60", "bytes=-0"])
    def test_an_unsatisfiable_range_gets_416(self, client: TestClient, header: str) -> None:
        digest = upload(client, DATA)
        response = client.get(f"/api/blobs/{digest}", headers={"Range": header})
        assert response.status_code == 416
        assert response.headers["content-range"] == "bytes */10"
        assert response.json()["code"] == "range_not_satisfiable"

    @pytest.mark.parametrize("header", ["items=0-1", "bytes=0-1,3-4", "bytes=4-2", "bytes=-"])
    def test_a_range_it_cannot_honour_is_ignored(self, client: TestClient, header: str) -> None:
        digest = upload(client, DATA)
        response = client.get(f"/api/blobs/{digest}", headers={"Range": header})
        assert response.status_code == 200
        assert response.content == DATA

    def test_a_missing_blob_is_404(self, client: TestClient) -> None:
        for method in ("GET", "HEAD"):
            response = client.request(method, f"/api/blobs/{digest_of(b'absent')}")
            assert response.status_code == 404
        assert client.get(f"/api/blobs/{digest_of(b'absent')}").json()["code"] == "blob_not_found"

    @pytest.mark.parametrize(
        "digest", ["sha256:abc", "md5:" + "0" * 32, "sha256:" + "G" * 64, "sha256:" + "A" * 64]
    )
    def test_an_invalid_digest_is_400(self, client: TestClient, digest: str) -> None:
        response = client.get(f"/api/blobs/{digest}")
        assert response.status_code == 400
        assert response.json()["code"] == "invalid_digest"
        assert client.head(f"/api/blobs/{digest}").status_code == 400

    def test_a_big_blob_streams_in_bounded_chunks(
        self, client: TestClient, services: Services
    ) -> None:
        data = os.urandom(3 * services.blob_store.chunk_size + 17)
        digest = upload(client, data)
        services.blobs.verify_below_bytes = 0  # hashed while streaming instead of before
        with client.stream("GET", f"/api/blobs/{digest}") as response:
            chunks = list(response.iter_raw())
        assert b"".join(chunks) == data


class TestCorruption:
    def test_a_flipped_byte_in_a_small_blob_is_500_and_never_served(
        self, client: TestClient, services: Services
    ) -> None:
        digest = upload(client, b"precious model weights")
        flip_byte(services, digest)
        for headers in ({}, {"Range": "bytes=0-3"}):
            response = client.get(f"/api/blobs/{digest}", headers=headers)
            assert response.status_code == 500
            assert response.json()["code"] == "blob_corrupted"
            assert b"model weights" not in response.content

    def test_a_size_different_from_the_record_is_500(
        self, client: TestClient, services: Services
    ) -> None:
        digest = upload(client, b"0123456789")
        store = services.blob_store
        assert isinstance(store, LocalBlobStore)
        store.path(digest).write_bytes(b"01234")
        for method in ("GET", "HEAD"):
            response = client.request(method, f"/api/blobs/{digest}")
            assert response.status_code == 500
        assert client.get(f"/api/blobs/{digest}").json()["code"] == "blob_corrupted"

    def test_a_big_corrupted_blob_breaks_the_stream_before_its_end(
        self, services: Services, live_server: LiveServer
    ) -> None:
        data = os.urandom(4 * services.blob_store.chunk_size)
        headers = {"Authorization": f"Bearer {ADMIN_KEY}"}
        with httpx.Client(base_url=live_server.url, headers=headers) as http:
            digest = digest_of(data)
            assert http.post(f"/api/uploads?digest={digest}", content=data).status_code == 201
            flip_byte(services, digest, at=len(data) // 2)
            services.blobs.verify_below_bytes = 0
            received = bytearray()
            with (
                pytest.raises(httpx.RemoteProtocolError),
                http.stream("GET", f"/api/blobs/{digest}") as response,
            ):
                assert response.status_code == 200  # headers went out before the end
                for chunk in response.iter_raw():
                    received += chunk
        assert len(received) < len(data)


@pytest.fixture
def s3_services(
    tmp_path: Path, database_url: str, s3_endpoint: str, s3_bucket: str
) -> Iterator[Services]:
    settings = Settings(
        home=tmp_path / "home",
        database_url=database_url,
        admin_key=ADMIN_KEY,
        auto_migrate=database_url.startswith("sqlite"),
        blob_url=f"s3://{s3_bucket}/models/blobs",
        s3_endpoint_url=s3_endpoint,
    )
    services = build_services(settings)
    yield services
    services.close()


@pytest.fixture
def s3_api(s3_services: Services) -> Iterator[TestClient]:
    headers = {"Authorization": f"Bearer {ADMIN_KEY}"}
    with TestClient(create_app(s3_services), headers=headers) as test_client:
        yield test_client


class TestOnS3:
    def test_chunked_upload_then_ranged_download(self, s3_api: TestClient) -> None:
        data = os.urandom((6 << 20) + 3)
        location = s3_api.post("/api/uploads").headers["location"]
        middle = 2 << 20
        first = s3_api.patch(
            location, content=data[:middle], headers={"Content-Range": f"0-{middle - 1}"}
        )
        assert first.status_code == 202
        digest = digest_of(data)
        assert s3_api.put(f"{location}?digest={digest}", content=data[middle:]).status_code == 201
        assert s3_api.get(f"/api/blobs/{digest}").content == data
        ranged = s3_api.get(f"/api/blobs/{digest}", headers={"Range": "bytes=100-199"})
        assert ranged.status_code == 206
        assert ranged.content == data[100:200]

    def test_a_tampered_object_is_500_blob_corrupted(
        self, s3_api: TestClient, s3_services: Services, s3_client: Any, s3_bucket: str
    ) -> None:
        digest = upload(s3_api, b"trusted bytes")
        key = s3_services.blob_store.key(digest)  # type: ignore[attr-defined]
        s3_client.put_object(Bucket=s3_bucket, Key=key, Body=b"TRUSTED bytes")
        response = s3_api.get(f"/api/blobs/{digest}")
        assert response.status_code == 500
        assert response.json()["code"] == "blob_corrupted"
        assert b"TRUSTED" not in response.content
