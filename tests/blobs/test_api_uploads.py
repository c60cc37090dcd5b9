"""/api/uploads over HTTP (in-process client), on both databases."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from modelport.app import Services
from tests.blobs.support import FakeClock, digest_of
from tests.conftest import ADMIN_KEY


def start(client: TestClient) -> str:
    response = client.post("/api/uploads")
    assert response.status_code == 202
    return response.headers["location"]


def patch(client: TestClient, location: str, start: int, data: bytes, **headers: str):
    headers.setdefault("Content-Range", f"{start}-{start + len(data) - 1}")
    return client.patch(location, content=data, headers=headers)


class TestStart:
    def test_start_answers_202_with_location_and_offset_zero(self, client: TestClient) -> None:
        response = client.post("/api/uploads")
        assert response.status_code == 202
        body = response.json()
        assert response.headers["location"] == f"/api/uploads/{body['id']}"
        assert response.headers["upload-offset"] == "0"
        assert body["offset"] == 0
        assert "expires_at" in body

    def test_a_monolithic_upload_stores_the_blob_in_one_request(self, client: TestClient) -> None:
        data = b"all at once"
        response = client.post(f"/api/uploads?digest={digest_of(data)}", content=data)
        assert response.status_code == 201
        assert response.headers["location"] == f"/api/blobs/{digest_of(data)}"
        assert response.headers["blob-digest"] == digest_of(data)
        assert client.get(f"/api/blobs/{digest_of(data)}").content == data

    def test_a_monolithic_upload_with_the_wrong_digest_leaves_nothing(
        self, client: TestClient, services: Services
    ) -> None:
        wrong = digest_of(b"something else")
        response = client.post(f"/api/uploads?digest={wrong}", content=b"these bytes")
        assert response.status_code == 400
        assert response.json()["code"] == "digest_mismatch"
        assert client.head(f"/api/blobs/{wrong}").status_code == 404
        assert list(services.blob_store.staged_uploads()) == []


class TestPatch:
    def test_chunks_append_at_the_offset(self, client: TestClient) -> None:
        location = start(client)
        response = patch(client, location, 0, b"hello ")
        assert response.status_code == 202
        assert response.headers["location"] == location
        assert response.headers["range"] == "0-5"
        assert response.headers["upload-offset"] == "6"
        assert response.json()["offset"] == 6
        # The RFC 9110 form is accepted too.
        response = patch(client, location, 6, b"world", **{"Content-Range": "bytes 6-10/*"})
        assert response.json()["offset"] == 11
        status = client.get(location)
        assert status.status_code == 200
        assert status.headers["range"] == "0-10"
        assert status.json()["offset"] == 11

    def test_a_chunk_without_content_range_goes_where_the_upload_is(
        self, client: TestClient
    ) -> None:
        location = start(client)
        client.patch(location, content=b"abc")
        assert client.patch(location, content=b"def").json()["offset"] == 6

    @pytest.mark.parametrize("wrong_start", [0, 2, 4])
    def test_a_wrong_offset_gets_416_with_the_current_offset(
        self, client: TestClient, wrong_start: int
    ) -> None:
        location = start(client)
        patch(client, location, 0, b"abc")
        response = patch(client, location, wrong_start, b"xyz")
        assert response.status_code == 416
        assert response.json()["code"] == "offset_mismatch"
        assert response.json()["offset"] == 3
        assert response.headers["upload-offset"] == "3"
        assert response.headers["range"] == "0-2"
        assert client.get(location).json()["offset"] == 3

    def test_a_chunk_too_large_gets_413(self, client: TestClient, services: Services) -> None:
        services.uploads.max_chunk_bytes = 10
        location = start(client)
        response = patch(client, location, 0, b"x" * 11)
        assert response.status_code == 413
        assert response.json()["code"] == "chunk_too_large"
        # Streamed without a declared length, the limit still holds.
        response = client.patch(location, content=iter([b"x" * 6, b"x" * 6]))
        assert response.status_code == 413
        assert client.get(location).json()["offset"] == 0

    @pytest.mark.parametrize(
        ("content_range", "code"),
        [
            ("5-2", "invalid_content_range"),
            ("abc", "invalid_content_range"),
            ("0-9", "chunk_length_mismatch"),
        ],
    )
    def test_bad_content_ranges_are_refused(
        self, client: TestClient, content_range: str, code: str
    ) -> None:
        location = start(client)
        response = client.patch(location, content=b"abc", headers={"Content-Range": content_range})
        assert response.status_code == 400
        assert response.json()["code"] == code
        assert client.get(location).json()["offset"] == 0

    def test_unknown_uploads_are_404(self, client: TestClient) -> None:
        for location in ("/api/uploads/" + "a" * 32, "/api/uploads/short", "/api/uploads/..%2E"):
            assert client.get(location).json()["code"] == "upload_not_found"
            response = patch(client, location, 0, b"x")
            assert response.status_code == 404
            assert response.json()["code"] == "upload_not_found"


class TestCommit:
    def test_commit_stores_the_blob_and_ends_the_upload(self, client: TestClient) -> None:
        location = start(client)
        patch(client, location, 0, b"abc")
        digest = digest_of(b"abc")
        response = client.put(f"{location}?digest={digest}")
        assert response.status_code == 201
        assert response.headers["location"] == f"/api/blobs/{digest}"
        assert response.headers["blob-digest"] == digest
        assert response.json() == {"digest": digest, "size": 3, "location": f"/api/blobs/{digest}"}
        assert client.get(location).status_code == 404
        assert client.get(f"/api/blobs/{digest}").content == b"abc"

    def test_the_last_chunk_may_come_with_the_commit(self, client: TestClient) -> None:
        location = start(client)
        patch(client, location, 0, b"abc")
        digest = digest_of(b"abcdef")
        response = client.put(
            f"{location}?digest={digest}", content=b"def", headers={"Content-Range": "3-5"}
        )
        assert response.status_code == 201
        assert client.get(f"/api/blobs/{digest}").content == b"abcdef"

    def test_an_upload_is_invisible_until_committed(self, client: TestClient) -> None:
        location = start(client)
        patch(client, location, 0, b"pending")
        digest = digest_of(b"pending")
        assert client.get(f"/api/blobs/{digest}").status_code == 404
        assert client.head(f"/api/blobs/{digest}").status_code == 404
        client.put(f"{location}?digest={digest}")
        assert client.head(f"/api/blobs/{digest}").status_code == 200

    def test_a_wrong_digest_gets_400_and_stores_nothing(self, client: TestClient) -> None:
        location = start(client)
        patch(client, location, 0, b"actual")
        wrong = digest_of(b"claimed")
        response = client.put(f"{location}?digest={wrong}")
        assert response.status_code == 400
        body = response.json()
        assert body["code"] == "digest_mismatch"
        assert body["actual"] == digest_of(b"actual")
        assert client.get(f"/api/blobs/{wrong}").status_code == 404
        assert client.get(f"/api/blobs/{digest_of(b'actual')}").status_code == 404
        # The upload is still there to be committed right, or aborted.
        assert client.get(location).json()["offset"] == 6
        assert client.put(f"{location}?digest={digest_of(b'actual')}").status_code == 201

    @pytest.mark.parametrize("query", ["", "?digest=", "?digest=sha256:1234", "?digest=abc"])
    def test_a_missing_or_invalid_digest_gets_400(self, client: TestClient, query: str) -> None:
        location = start(client)
        patch(client, location, 0, b"abc")
        response = client.put(f"{location}{query}")
        assert response.status_code == 400
        assert response.json()["code"] == "invalid_digest"
        assert client.get(location).json()["offset"] == 3

    def test_committing_known_bytes_again_succeeds(self, client: TestClient) -> None:
        digest = digest_of(b"twice")
        for _ in range(2):
            location = start(client)
            patch(client, location, 0, b"twice")
            assert client.put(f"{location}?digest={digest}").status_code == 201


class TestAbortAndExpiry:
    def test_delete_aborts_the_upload(self, client: TestClient, services: Services) -> None:
        location = start(client)
        patch(client, location, 0, b"abc")
        assert client.delete(location).status_code == 204
        assert client.get(location).json()["code"] == "upload_not_found"
        assert patch(client, location, 3, b"d").status_code == 404
        assert client.put(f"{location}?digest={digest_of(b'abc')}").status_code == 404
        assert client.delete(location).status_code == 404
        assert list(services.blob_store.staged_uploads()) == []

    def test_an_expired_upload_is_404(self, client: TestClient, services: Services) -> None:
        clock = FakeClock()
        services.uploads.clock = clock
        location = start(client)
        patch(client, location, 0, b"abc")
        clock.advance(services.settings.uploads.ttl_seconds + 1)
        response = client.get(location)
        assert response.status_code == 404
        assert response.json()["code"] == "upload_not_found"
        assert patch(client, location, 3, b"d").status_code == 404
        assert services.uploads.sweep_expired() == 1


ROUTES = [
    ("POST", "/api/uploads"),
    ("GET", "/api/uploads/" + "a" * 32),
    ("PATCH", "/api/uploads/" + "a" * 32),
    ("PUT", "/api/uploads/" + "a" * 32 + "?digest=" + digest_of(b"")),
    ("DELETE", "/api/uploads/" + "a" * 32),
    ("GET", "/api/blobs/" + digest_of(b"")),
    ("HEAD", "/api/blobs/" + digest_of(b"")),
]


def test_every_route_needs_the_admin_key(anon_client: TestClient) -> None:
    for method, url in ROUTES:
        for authorization in (None, "Bearer wrong-key-" + "y" * 24, "Basic abc"):
            headers = {"Authorization": authorization} if authorization else {}
            response = anon_client.request(method, url, headers=headers, content=b"x")
            assert response.status_code == 401, (method, url, authorization)
            if method != "HEAD":
                code = response.json()["code"]
                assert code in ("missing_credentials", "invalid_credentials")


def test_the_admin_key_opens_the_routes(anon_client: TestClient) -> None:
    headers = {"Authorization": f"Bearer {ADMIN_KEY}"}
    assert anon_client.post("/api/uploads", headers=headers).status_code == 202
