"""A request body that stops short of its Content-Length is answered 408 ``body_timeout``
(in each surface's error format) once no part of it arrived for the read timeout, and
its connection is closed; a body that keeps arriving, however slowly, is not cut."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import orjson
import pytest

from tests.api_v2.conftest import V2Factory
from tests.conftest import ADMIN_KEY, LiveServer

TIMEOUT = 1.0
BODY = orjson.dumps(
    {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1, 2, 3, 4]}]}
)


@pytest.fixture
def server(make_v2: V2Factory) -> Iterator[LiveServer]:
    client, services, publisher = make_v2(body_read_timeout_seconds=TIMEOUT)
    publisher.adder()
    assert client.post("/v2/repository/models/acme/adder/load").status_code == 200
    client.__exit__(None, None, None)  # the live server runs the lifespan now
    live = LiveServer(services).start()
    yield live
    live.stop()
    client.__enter__()  # the factory closes what it opened


def head(path: str, length: int) -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: modelport\r\nAuthorization: Bearer {ADMIN_KEY}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {length}\r\n\r\n"
    ).encode()


def read_to_close(sock: socket.socket) -> bytes:
    """Everything the server writes until it closes the connection."""
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def split(raw: bytes) -> tuple[str, dict[str, str], bytes]:
    top, _, body = raw.partition(b"\r\n\r\n")
    status, *lines = top.decode().split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
    return status, headers, body


@pytest.mark.parametrize(
    ("path", "error_field"),
    [("/v2/models/acme/adder/infer", "error"), ("/api/models", "detail")],
)
def test_a_body_shorter_than_its_length_is_answered_408_and_the_connection_closed(
    server: LiveServer, path: str, error_field: str
) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        started = time.monotonic()
        sock.sendall(head(path, len(BODY)) + BODY[:10])
        raw = read_to_close(sock)  # returns: the server closed the connection
        waited = time.monotonic() - started
    assert TIMEOUT <= waited < 20  # cut, with room for a loaded machine to answer
    status, headers, body = split(raw)
    assert status.startswith("HTTP/1.1 408")
    assert headers["connection"] == "close"
    doc = orjson.loads(body)
    assert doc["code"] == "body_timeout" and "request body" in doc[error_field]


def test_a_body_that_keeps_arriving_is_not_cut(server: LiveServer) -> None:
    size = -(-len(BODY) // 8)
    parts = [BODY[i : i + size] for i in range(0, len(BODY), size)]
    assert len(parts) == 8
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(head("/v2/models/acme/adder/infer", len(BODY)))
        # 1.6 s in all, never more than a fifth of TIMEOUT without a byte: a loaded
        # machine can delay a part by most of a second and the body still keeps arriving.
        for part in parts:
            time.sleep(TIMEOUT * 0.2)
            sock.sendall(part)
        answer = sock.recv(65536)
    assert answer.startswith(b"HTTP/1.1 200")
