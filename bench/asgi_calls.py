"""Shared by the in-process benchmarks: one POST straight into an ASGI app, no sockets."""

from __future__ import annotations

import asyncio
from typing import Any


async def post(app: Any, path: str, headers: list[tuple[bytes, bytes]], body: bytes) -> int:
    """POST ``body`` to ``path`` and return the response's status."""
    scope = {
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
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
        "state": {},
    }
    status = 0
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if sent:
            # As a server does: the disconnect comes once the connection closes, which
            # here is never while the call runs (a caller watch must not cancel it).
            await asyncio.get_running_loop().create_future()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]

    await app(scope, receive, send)
    return status


def percentile(samples: list[int], q: float) -> float:
    """The q-quantile of nanosecond samples, in microseconds."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] / 1000
