"""Server-sent events for ``/v1`` streams: the encoding of one event, and the ASGI
response that sends an async iterator of them and stops it when its client leaves.

A client that disconnects mid-stream cancels the response's task (the same
``api.disconnect.CallerWatch`` as every inference call): the iterator is closed at
once, which ends the ``CallStream``s it reads (the engine stops working for them and
they are settled ``cancelled`` for what was delivered).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Mapping
from typing import Any

import orjson
from starlette.types import Receive, Scope, Send

from modelport.api.disconnect import CallerWatch

DONE = b"data: [DONE]\n\n"


def event(data: Mapping[str, Any], name: str | None = None) -> bytes:
    """One event: ``data: {json}`` (after ``event: name`` when named), then a blank line."""
    head = b"" if name is None else b"event: " + name.encode() + b"\n"
    return head + b"data: " + orjson.dumps(data) + b"\n\n"


class EventStream:
    """An ASGI response streaming ``events`` (encoded SSE events) as they come."""

    media_type = "text/event-stream; charset=utf-8"

    def __init__(
        self, events: AsyncGenerator[bytes, None], headers: Mapping[str, str] | None = None
    ) -> None:
        self.events = events
        self.headers = dict(headers or {})
        self.sent = 0
        """Events sent before the stream ended."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = [
            (b"content-type", self.media_type.encode()),
            (b"cache-control", b"no-cache"),
            (b"x-accel-buffering", b"no"),  # proxies: pass each event on at once
            *((k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in self.headers.items()),
        ]
        watch = CallerWatch(receive)
        try:
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            async for data in self.events:
                await send({"type": "http.response.body", "body": data, "more_body": True})
                self.sent += 1
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except asyncio.CancelledError:
            if not watch.caller_gone():
                raise  # not the client's doing (the server is stopping)
        except OSError:
            pass  # the server found the connection closed while sending
        finally:
            watch.stop()
            await self.events.aclose()  # ends the calls it reads, if still running
