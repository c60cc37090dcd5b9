"""The local backend of a process without a model host (a gateway): every call to it
answers 503 ``role_lacks_service``, so a version not on a remote backend gets a clear
refusal instead of a crash."""

from __future__ import annotations

from collections.abc import AsyncIterator

from modelport.errors import Unavailable
from modelport.runtime.formats.registry import known_formats
from modelport.serving.placement import ROLE_LACKS_SERVICE
from modelport.serving.types import (
    BackendRequest,
    BackendResponse,
    Capabilities,
    Health,
    StreamChunk,
    StreamRequest,
)


class AbsentBackend:
    """Stands where ``LocalBackend`` would; hosts nothing."""

    def __init__(self, name: str = "local", *, role: str = "gateway") -> None:
        self.name = name
        self.role = role

    def capabilities(self) -> Capabilities:
        # As capable as a host would be: routing picks it, and its refusal is the answer.
        return Capabilities(formats=known_formats(), max_batch_size=1 << 20)

    async def health(self) -> Health:
        return Health.HEALTHY  # nothing to probe; every call is refused by ``infer``

    async def infer(self, request: BackendRequest) -> BackendResponse:
        raise self._refusal(request.version.ref)

    async def stream(self, request: StreamRequest) -> AsyncIterator[StreamChunk]:
        raise self._refusal(request.version.ref)
        yield  # an async generator, as ``stream`` is  # pragma: no cover

    async def close(self) -> None:
        return None

    def _refusal(self, ref: str) -> Unavailable:
        return Unavailable(
            f"this process ({self.role}) hosts no models: {ref} must run on a remote "
            "backend (name it in a deployment's backends)",
            code=ROLE_LACKS_SERVICE,
            role=self.role,
            scope="version",
        )
