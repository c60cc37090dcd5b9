"""The backend contract.

Call order: ``capabilities()`` is read when routing (cheap, no I/O); ``health()`` is
called by the prober, never on the request path; ``infer()`` runs one request and
must give up by ``request.deadline`` (raising ``modelport.errors.DeadlineExceeded``).
A backend raises ``modelport.errors`` types only: ``Unavailable`` when it cannot
serve at all (counted by the circuit breaker), ``InvalidInput`` for a request it
refuses (not counted), ``Overloaded`` when its queue is full. An ``Unavailable``
with ``scope="version"`` (e.g. the version failed to load, or a remote server does
not have it) is about that version only: it is retried elsewhere but not counted
against the backend.
"""

from __future__ import annotations

from typing import Protocol

from modelport.serving.types import BackendRequest, BackendResponse, Capabilities, Health


class Backend(Protocol):
    name: str
    """Stable name of this backend/replica, reported in provenance."""

    def capabilities(self) -> Capabilities: ...

    async def health(self) -> Health: ...

    async def infer(self, request: BackendRequest) -> BackendResponse: ...

    async def close(self) -> None: ...
