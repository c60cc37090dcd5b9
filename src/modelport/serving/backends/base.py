"""The backend contract.

Call order: ``capabilities()`` is read when routing (cheap, no I/O); ``health()`` is
called by the prober, never on the request path; ``infer()`` runs one request and
must give up by ``request.deadline`` (raising ``modelport.errors.DeadlineExceeded``);
``stream()`` runs one generative request and yields its chunks in order, as the engine
produces them. A consumer that stops iterating (``aclose``, or the consuming task
cancelled) cancels the engine's work for it. A backend that cannot stream raises
``Unavailable`` with code ``streaming_unsupported`` and ``scope="version"`` (another
backend may stream the version; not counted by the breaker); a version whose runtime
is a tensor model raises ``Unprocessable`` ``streaming_unsupported`` wherever it runs.
A backend raises ``modelport.errors`` types only: ``Unavailable`` when it cannot
serve at all (counted by the circuit breaker), ``InvalidInput`` for a request it
refuses (not counted), ``Overloaded`` when its queue is full. An ``Unavailable``
with ``scope="version"`` (e.g. the version failed to load, or a remote server does
not have it) is about that version only: it is retried elsewhere but not counted
against the backend.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol

from modelport.errors import Unavailable
from modelport.serving.types import (
    BackendRequest,
    BackendResponse,
    Capabilities,
    Health,
    StreamChunk,
    StreamRequest,
)

STREAMING_UNSUPPORTED = "streaming_unsupported"
"""The stable code of a stream asked of a backend or a version that cannot stream."""


class Backend(Protocol):
    name: str
    """Stable name of this backend/replica, reported in provenance."""

    def capabilities(self) -> Capabilities: ...

    async def health(self) -> Health: ...

    async def infer(self, request: BackendRequest) -> BackendResponse: ...

    def stream(self, request: StreamRequest) -> AsyncIterator[StreamChunk]: ...

    async def close(self) -> None: ...


def streaming_unsupported(backend: str, request: StreamRequest) -> Unavailable:
    """The refusal of a backend that cannot stream (yet)."""
    return Unavailable(
        f"backend '{backend}' cannot stream {request.version.ref}",
        code=STREAMING_UNSUPPORTED,
        scope="version",
    )


async def refuse_stream(backend: str, request: StreamRequest) -> AsyncIterator[StreamChunk]:
    """``Backend.stream`` of a backend that cannot stream: raises on the first chunk."""
    raise streaming_unsupported(backend, request)
    yield  # an async generator, as ``stream`` is  # pragma: no cover
