"""The console's one way to the platform: the HTTP API of the same application, called
in process with the signed-in credential, so every page is authorized as the API
authorizes that key and nothing bypasses it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
from starlette.types import ASGIApp, Message, Scope

INTERNAL_BASE = "http://console.internal"
"""The base URL of in-process calls (never resolved: the transport is the app itself)."""


def literal_dots(path: str) -> str:
    """``path`` with each ``.`` or ``..`` segment percent-encoded: a name taken from a
    page's URL (``/console/invoices/%2E``) stays a name the API looks up, rather than a
    step the URL resolves to another resource (``/api/invoices``, the list)."""
    return "/".join(
        segment.replace(".", "%2E") if segment in (".", "..") else segment
        for segment in path.split("/")
    )


class SignedOut(Exception):
    """The API refused the session's credential (revoked, expired): sign in again."""


@dataclass(frozen=True)
class Answer:
    """An API response, decoded."""

    status: int
    body: Any
    """The JSON body (None when it is not JSON)."""
    seconds: float
    """Wall time of the call, as the console measured it."""

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def error(self) -> str:
        """The problem's message and stable code (``api/problems.py``), for a page."""
        if isinstance(self.body, dict):
            message = str(self.body.get("error") or self.body.get("detail") or "")
            code = self.body.get("code")
            return f"{message} ({code})" if code else message
        return f"HTTP {self.status}"


class PlatformAPI:
    """Calls the application ``app`` in process as the holder of ``credential``."""

    def __init__(self, app: ASGIApp, credential: str) -> None:
        self._app = app
        self._credential = credential

    async def call(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, str] | None = None,
        json: Any = None,
        signed_out_on_401: bool = True,
    ) -> Answer:
        """One call; a 401 raises ``SignedOut`` (the page then sends the person to sign
        in), every other status is the caller's to show."""
        transport = httpx.ASGITransport(app=self._app)
        headers = {"Authorization": f"Bearer {self._credential}"}
        async with httpx.AsyncClient(
            transport=transport, base_url=INTERNAL_BASE, headers=headers, timeout=60.0
        ) as client:
            started = time.perf_counter()
            response = await client.request(method, literal_dots(path), params=params, json=json)
            seconds = time.perf_counter() - started
        if response.status_code == 401 and signed_out_on_401:
            raise SignedOut
        try:
            body = response.json()
        except ValueError:
            body = None
        return Answer(status=response.status_code, body=body, seconds=seconds)

    async def get(self, path: str, **params: str | None) -> Answer:
        kept = {k: v for k, v in params.items() if v not in (None, "")}
        return await self.call("GET", path, params=kept)


class Stream:
    """A streamed API response read as it is sent: the application is called in process
    as an ASGI app (httpx's ASGI transport would wait for the whole body), and closing
    the stream tells the application its caller has gone, which cancels the call."""

    def __init__(self, app: ASGIApp, credential: str, path: str, body: bytes) -> None:
        self._app = app
        self._messages: asyncio.Queue[Message] = asyncio.Queue()
        self._gone = asyncio.Event()
        self._body: bytes | None = body
        headers = [
            (b"host", INTERNAL_BASE.split("://", 1)[1].encode()),
            (b"authorization", f"Bearer {credential}".encode()),
            (b"content-type", b"application/json"),
            (b"accept", b"text/event-stream"),
            (b"content-length", str(len(body)).encode()),
        ]
        self._scope: Scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "root_path": "",
            "headers": headers,
            "client": ("127.0.0.1", 0),
            "server": ("console.internal", 80),
        }
        self._task: asyncio.Task[None] | None = None
        self.status = 0

    async def _receive(self) -> Message:
        if self._body is not None:
            body, self._body = self._body, None
            return {"type": "http.request", "body": body, "more_body": False}
        await self._gone.wait()
        return {"type": "http.disconnect"}

    async def _send(self, message: Message) -> None:
        await self._messages.put(message)

    async def _run(self) -> None:
        try:
            await self._app(self._scope, self._receive, self._send)
        finally:
            await self._messages.put({"type": "console.done"})

    async def open(self) -> int:
        """Start the call; its status once the response starts."""
        self._task = asyncio.create_task(self._run())
        message = await self._messages.get()
        if message["type"] != "http.response.start":
            raise RuntimeError("the application ended without a response")
        self.status = int(message["status"])
        return self.status

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body, chunk by chunk as the application sends it."""
        while True:
            message = await self._messages.get()
            if message["type"] != "http.response.body":
                return
            if message.get("body"):
                yield message["body"]
            if not message.get("more_body", False):
                return

    async def close(self) -> None:
        self._gone.set()
        if self._task is not None and not self._task.done():
            try:
                await asyncio.wait_for(asyncio.shield(self._task), timeout=5)
            except TimeoutError:
                self._task.cancel()
