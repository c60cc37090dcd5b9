"""The remote OIP backend's connections (``aio_transport``): calls in flight share a
few kept-alive connections instead of one each time, requests arrive whole, and the
transport's failures are the backend's usual errors; TLS to a pinned address names the URL's host. The server is a bare asyncio one
that counts the connections it accepts."""

from __future__ import annotations

import asyncio
import ssl
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import orjson
import pytest

from modelport.errors import DeadlineExceeded, Unavailable
from modelport.serving.backends import v2_wire
from modelport.serving.backends.aio_transport import AiohttpTransport
from modelport.serving.backends.remote_v2 import RemoteV2Backend
from modelport.serving.types import BackendRequest
from tests.serving.backend_support import version_ref
from tests.serving.pool.tls import Authority

X = np.arange(8, dtype=np.float32).reshape(2, 4)


class CountingServer:
    """Answers every request with ``y`` = its input ``x`` (binary tensors); ``stall``:
    reads requests and never answers; ``drop``: closes each connection instead."""

    def __init__(self, *, stall: bool = False, drop: bool = False) -> None:
        self.stall, self.drop = stall, drop
        self.accepted = 0
        self.requests: list[tuple[bytes, bytes]] = []
        self.server: asyncio.Server | None = None
        self.handlers: list[asyncio.Task[None]] = []

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    async def stop(self) -> None:
        """Stops listening and ends the connections still open."""
        assert self.server is not None
        self.server.close()
        for task in self.handlers:
            task.cancel()
        await asyncio.gather(*self.handlers, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        self.handlers.append(asyncio.current_task())  # type: ignore[arg-type]
        try:
            while head := await reader.readuntil(b"\r\n\r\n"):
                length = next(
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                )
                body = await reader.readexactly(length)
                self.requests.append((head, body))
                if self.drop:
                    break
                if self.stall:
                    await asyncio.Event().wait()
                writer.write(answer(head, body))
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass  # the client went, or the test's loop ended with the connection open
        finally:
            writer.close()


def answer(head: bytes, body: bytes) -> bytes:
    """The request's input back as output ``y``."""
    header_length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(v2_wire.INFERENCE_HEADER.lower().encode() + b":")
    )
    request = orjson.loads(body[:header_length])
    tensor = request["inputs"][0]
    raw = body[header_length:]
    doc = orjson.dumps(
        {
            "outputs": [
                {
                    "name": "y",
                    "datatype": tensor["datatype"],
                    "shape": tensor["shape"],
                    "parameters": {"binary_data_size": len(raw)},
                }
            ]
        }
    )
    return (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
        + f"{v2_wire.INFERENCE_HEADER}: {len(doc)}\r\n".encode()
        + f"Content-Length: {len(doc) + len(raw)}\r\n\r\n".encode()
        + doc
        + raw
    )


def call(x: np.ndarray, timeout: float = 30.0) -> BackendRequest:
    return BackendRequest(
        version=version_ref(), inputs={"x": x}, deadline=time.monotonic() + timeout
    )


def test_concurrent_calls_reuse_their_connections() -> None:
    server = CountingServer()

    async def scenario() -> list[np.ndarray]:
        backend = RemoteV2Backend("remote", await server.start(), api_key="k3y")
        try:
            answers: list[np.ndarray] = []
            for round_ in range(4):
                responses = await asyncio.gather(
                    *(backend.infer(call(X + 16 * round_ + i)) for i in range(16))
                )
                answers += [r.outputs["y"] for r in responses]
            return answers
        finally:
            await backend.close()
            await server.stop()

    answers = asyncio.run(scenario())
    expected = [X + 16 * round_ + i for round_ in range(4) for i in range(16)]
    for got, want in zip(answers, expected, strict=True):
        np.testing.assert_array_equal(got, want)
    assert len(server.requests) == 64
    # At most one connection per call in flight, then kept: the later rounds open none.
    assert 1 <= server.accepted <= 16
    head = server.requests[0][0].lower()
    assert b"authorization: bearer k3y\r\n" in head
    assert b"host: 127.0.0.1:" in head
    assert head.count(b"\r\ncontent-length:") == 1  # httpx's, not a second one


def test_no_answer_by_the_deadline_is_deadline_exceeded() -> None:
    server = CountingServer(stall=True)

    async def scenario() -> None:
        backend = RemoteV2Backend("remote", await server.start())
        try:
            await backend.infer(call(X, timeout=0.2))
        finally:
            await backend.close()
            await server.stop()

    with pytest.raises(DeadlineExceeded):
        asyncio.run(scenario())
    assert len(server.requests) == 1


def test_a_connection_closed_without_an_answer_is_unreachable() -> None:
    server = CountingServer(drop=True)

    async def scenario() -> None:
        backend = RemoteV2Backend("remote", await server.start())
        try:
            await backend.infer(call(X))
        finally:
            await backend.close()
            await server.stop()

    with pytest.raises(Unavailable) as raised:
        asyncio.run(scenario())
    assert raised.value.code == "backend_unreachable"


def test_tls_to_a_pinned_address_verifies_the_url_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The guard sends a request to the checked address with the URL's host as
    ``sni_hostname``: the transport names and verifies that host, not the address."""
    authority = Authority.create("test-ca")
    cert, key = authority.issue("remote", dns="models.example.com")
    (tmp_path / "ca.pem").write_bytes(authority.pem)
    (tmp_path / "cert.pem").write_bytes(cert)
    (tmp_path / "key.pem").write_bytes(key)
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "ca.pem"))  # trusted as httpx does
    server = CountingServer()
    body, headers = v2_wire.encode_request({"x": X})

    async def scenario() -> list[int | str]:
        tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        tls.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
        server.server = await asyncio.start_server(server._serve, "127.0.0.1", 0, ssl=tls)
        port = server.server.sockets[0].getsockname()[1]
        transport = AiohttpTransport()
        outcomes: list[int | str] = []
        try:
            for name in ("models.example.com", "other.example.com"):
                sent = httpx.Request(
                    "POST",
                    f"https://127.0.0.1:{port}/v2/models/m/infer",
                    content=body,
                    headers={**headers, "Host": "models.example.com"},
                    extensions={"sni_hostname": name},
                )
                try:
                    outcomes.append((await transport.handle_async_request(sent)).status_code)
                except httpx.ConnectError as exc:
                    outcomes.append(type(exc).__name__)
        finally:
            await transport.aclose()
            await server.stop()
        return outcomes

    assert asyncio.run(scenario()) == [200, "ConnectError"]
    assert b"\r\nHost: models.example.com\r\n" in server.requests[0][0]


def test_a_backend_serves_again_from_another_event_loop() -> None:
    """Its connections belong to the loop that made them; a later loop gets its own."""
    server = CountingServer()
    serving = asyncio.new_event_loop()  # the server's, on a thread of its own
    thread = threading.Thread(target=serving.run_forever, daemon=True)
    thread.start()

    async def once(backend: RemoteV2Backend) -> np.ndarray:
        return (await backend.infer(call(X))).outputs["y"]

    async def twice_then_close(backend: RemoteV2Backend) -> np.ndarray:
        await once(backend)
        try:
            return await once(backend)
        finally:
            await backend.close()

    try:
        url = asyncio.run_coroutine_threadsafe(server.start(), serving).result()
        backend = RemoteV2Backend("remote", url)
        np.testing.assert_array_equal(asyncio.run(once(backend)), X)
        np.testing.assert_array_equal(asyncio.run(twice_then_close(backend)), X)
    finally:
        asyncio.run_coroutine_threadsafe(server.stop(), serving).result()
        serving.call_soon_threadsafe(serving.stop)
        thread.join()
        serving.close()
    assert len(server.requests) == 3
