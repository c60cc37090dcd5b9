"""The one reader of a request's whole body, with its size limit.

Every route that reads a body whole to parse it (``/v2``, ``/v1``, the worker's
``/v2``) reads it here: a declared ``Content-Length`` above the limit is refused
before reading, a body streamed past it as soon as it passes (413
``payload_too_large``), and a caller gone before its last byte is a
``ClientDisconnect``. Straight from ``receive``: ``Request.stream()``'s generator
costs more than the copy for the small bodies that dominate inference traffic.
"""

from __future__ import annotations

from starlette.requests import ClientDisconnect, Request

from modelport.errors import PayloadTooLarge


async def read_body(request: Request, limit: int, length: bytes | None = None) -> bytes:
    """The whole body, refused (413) above ``limit`` bytes. ``length``: the raw
    Content-Length header when the caller has read the headers already."""
    if length is None:
        length = request.headers.get("content-length", "").encode("latin-1") or None
    if length is not None and length.isdigit() and int(length) > limit:
        raise PayloadTooLarge(
            f"request body of {length.decode('latin-1')} bytes is above the limit of {limit}",
            code="payload_too_large",
        )
    receive = request.receive
    chunks = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientDisconnect()
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(
                f"request body is above the limit of {limit} bytes", code="payload_too_large"
            )
        chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)
