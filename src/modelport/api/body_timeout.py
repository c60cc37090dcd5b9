"""A read timeout on request bodies.

The server hands the application a body as it arrives and waits as long as the
client likes: a body shorter than its ``Content-Length`` held its connection (and
whatever the application held meanwhile: an admission slot, a reservation) open
with no answer. ``BodyReadTimeout``, in front of everything, bounds every wait for
the next part of a body by ``body_read_timeout_seconds`` (give or take a quarter:
one task per event loop looks at the waiting reads, rather than a timer per read):
the wait between two reads, not the whole body, so a large upload on a slow link
still goes through.

When a wait runs out, ``receive`` raises ``BodyTimedOut`` (408 ``body_timeout``),
which each surface renders in its own format as it does any error, and the answer
is sent with ``Connection: close``: the rest of the body may still arrive, and
nothing after it on that connection can be read as a request. A client that is
gone gets nothing (the server drops the write) and its connection is freed all the
same. Once the body is in, ``receive`` is passed through untimed: it then only
reports a disconnect (``api.disconnect`` waits on it for as long as a call runs).
"""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from modelport.api.problems import error_response
from modelport.errors import RequestTimeout

_CLOSE = (b"connection", b"close")


class BodyTimedOut(RequestTimeout, StarletteHTTPException):
    """Raised from ``receive``. A Starlette HTTP error too, so that FastAPI's body
    parsing lets it through instead of turning it into a 400; the modelport handler
    renders it (it comes first in the MRO)."""

    def __init__(self, seconds: float) -> None:
        RequestTimeout.__init__(
            self,
            f"no part of the request body arrived for {seconds:g} s; the connection is closed",
            timeout_seconds=seconds,
        )
        self.status_code = 408
        self.detail = self.message
        self.headers = None


class BodyReadTimeout:
    """ASGI middleware: times out a stalled request body (see the module docstring)."""

    def __init__(self, app: ASGIApp, *, seconds: float) -> None:
        self.app = app
        self.seconds = seconds
        self._stalls: _Stalls | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        stalls = self._stalls
        if stalls is None or stalls.loop is not asyncio.get_running_loop():
            stalls = self._stalls = _Stalls(self.seconds)
        reader = _Reader(receive, send, stalls)
        try:
            await self.app(scope, reader.receive, reader.send)
        except Exception:
            # A timeout the application let escape unanswered is answered here.
            if reader.timed_out is None or reader.started:
                raise
            await error_response(Request(scope), reader.timed_out)(scope, receive, reader.send)


class _Stalls:
    """The body reads waiting on one event loop, and one task that times them out.

    A timer per read (``asyncio.timeout``) cost more than the rest of the lane for an
    infer call whose body is already there; registering a read here costs a dict
    entry. The task looks every quarter of the timeout (at most every second), so a
    stalled read ends between ``seconds`` and a quarter more; it exits once a look
    finds no read waiting and none begun since the last one."""

    def __init__(self, seconds: float) -> None:
        self.loop = asyncio.get_running_loop()
        self.seconds = seconds
        self.period = min(1.0, seconds / 4)
        self.waiting: dict[_Reader, tuple[float, asyncio.Task[Any]]] = {}
        self.reads = 0
        self._sweeper: asyncio.Task[None] | None = None

    def add(self, reader: _Reader) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.waiting[reader] = (self.loop.time(), task)
        self.reads += 1
        if self._sweeper is None:
            self._sweeper = self.loop.create_task(self._sweep(), name="body-read-timeout")

    async def _sweep(self) -> None:
        try:
            seen = -1
            while self.waiting or self.reads != seen:
                seen = self.reads
                await asyncio.sleep(self.period)
                now = self.loop.time()
                for reader, (since, task) in list(self.waiting.items()):
                    if now - since >= self.seconds:
                        del self.waiting[reader]
                        reader.timed_out = BodyTimedOut(self.seconds)
                        task.cancel("the request body stalled")
        finally:
            self._sweeper = None


class _Reader:
    """One request's ``receive`` with the timeout, and its ``send`` that closes the
    connection after a timeout."""

    __slots__ = ("_receive", "_send", "body_done", "stalls", "started", "timed_out")

    def __init__(self, receive: Receive, send: Send, stalls: _Stalls) -> None:
        self._receive = receive
        self._send = send
        self.stalls = stalls
        self.body_done = False
        self.started = False
        self.timed_out: BodyTimedOut | None = None

    async def receive(self) -> Message:
        if self.body_done:
            return await self._receive()
        if self.timed_out is not None:
            raise self.timed_out
        stalls = self.stalls
        stalls.add(self)
        try:
            message = await self._receive()
        except asyncio.CancelledError:
            timed_out = self.timed_out
            if timed_out is None:
                raise  # not ours: the caller's task is being cancelled
            task = asyncio.current_task()
            assert task is not None
            task.uncancel()
            raise timed_out from None
        finally:
            stalls.waiting.pop(self, None)
        if message["type"] != "http.request" or not message.get("more_body", False):
            self.body_done = True
        return message

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.started = True
            if self.timed_out is not None:
                headers: list[Any] = [
                    h for h in message.get("headers", ()) if h[0] != b"connection"
                ]
                message = {**message, "headers": [*headers, _CLOSE]}
        await self._send(message)
