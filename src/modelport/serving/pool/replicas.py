"""The replicas of a version on the worker pool, as the router hands them to the
dispatcher: a live sequence, read from the gateway's ``PoolView`` each time it is
iterated, so a replica takes traffic as soon as its worker reports it ready and a
worker whose lease lapsed leaves every route at the next refresh, with no route
rebuilt. With no ready replica the sequence holds one stand-in that refuses the call
(503 ``no_ready_replica``, version-scoped: no breaker counts it)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import overload

from modelport.errors import Unavailable
from modelport.serving.backends.base import Backend
from modelport.serving.pool.types import WorkerInfo
from modelport.serving.pool.view import PoolView
from modelport.serving.types import (
    BackendRequest,
    BackendResponse,
    Capabilities,
    Health,
    StreamChunk,
    StreamRequest,
    VersionRef,
)

NO_READY_REPLICA = "no_ready_replica"


class NoReadyReplica:
    """Stands for a version with no ready replica on a live worker."""

    def __init__(self, ref: str, formats: frozenset[str], hardware: frozenset[str]) -> None:
        self.name = f"pool:{ref}"
        # As capable as the version needs: its refusal, not a capability miss, is the answer.
        self._capabilities = Capabilities(
            formats=formats, max_batch_size=1 << 20, hardware=hardware
        )
        self._ref = ref

    def capabilities(self) -> Capabilities:
        return self._capabilities

    async def health(self) -> Health:
        return Health.HEALTHY

    async def infer(self, request: BackendRequest) -> BackendResponse:
        raise self._refusal()

    async def stream(self, request: StreamRequest) -> AsyncIterator[StreamChunk]:
        raise self._refusal()
        yield  # an async generator, as ``stream`` is  # pragma: no cover

    async def close(self) -> None:
        return None

    def _refusal(self) -> Unavailable:
        return Unavailable(
            f"{self._ref} has no ready replica on a live worker",
            code=NO_READY_REPLICA,
            scope="version",
            retry_after=1,
        )


class LiveReplicas(Sequence[Backend]):
    """``version``'s ready replicas now, the first one in turn (see the module)."""

    def __init__(
        self, version: VersionRef, view: PoolView, make: Callable[[WorkerInfo], Backend]
    ) -> None:
        self.version = version
        self._view = view
        self._make = make
        self._turn = 0
        manifest = version.manifest
        self._none = NoReadyReplica(
            version.ref,
            frozenset({manifest.format}),
            frozenset(manifest.resources.hardware or ("cpu",)),
        )

    def _now(self) -> list[Backend]:
        ready = self._view.ready(self.version.ref)
        if not ready:
            return [self._none]
        # Round robin: each walk starts at the next replica, so every ready replica
        # takes its share (the queues a heartbeat reports are a second old: too stale
        # to steer each call by).
        self._turn = (self._turn + 1) % len(ready)
        start = self._turn
        return [self._make(w) for w in (*ready[start:], *ready[:start])]

    def __iter__(self) -> Iterator[Backend]:
        return iter(self._now())

    def __len__(self) -> int:
        return len(self._now())

    @overload
    def __getitem__(self, index: int) -> Backend: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Backend]: ...

    def __getitem__(self, index: int | slice) -> Backend | Sequence[Backend]:
        return self._now()[index]


class PoolReplicas:
    """The router's replica provider on a gateway over the pool: one ``LiveReplicas``
    per version (kept: versions are immutable)."""

    def __init__(self, view: PoolView, make: Callable[[WorkerInfo], Backend]) -> None:
        self.view = view
        self._make = make
        self._made: dict[tuple[str, str], LiveReplicas] = {}

    def __call__(self, version: VersionRef) -> Sequence[Backend]:
        key = (version.ref, version.manifest_digest)
        found = self._made.get(key)
        if found is None:
            found = self._made[key] = LiveReplicas(version, self.view, self._make)
        return found
