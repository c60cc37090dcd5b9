"""The replicas of a version on the worker pool, as the router hands them to the
dispatcher: a live sequence, read from the gateway's ``PoolView`` each time it is
iterated, so a replica takes traffic as soon as its worker reports it ready and a
worker whose lease lapsed leaves every route at the next refresh, with no route
rebuilt. With no ready replica the sequence holds one stand-in: for a version the
pool holds (scaled to zero, or its replicas lost) it wakes the version (``ColdStart``:
the autoscaler's target becomes at least one, the placer places it) and waits, within
the call's deadline, for a replica to be ready, then calls it; if none is ready in
time, 503 ``cold_start`` with ``Retry-After``. For a version the pool does not hold it
refuses at once (503 ``no_ready_replica``). Both refusals are version-scoped: no
breaker counts them.

Each call routed to a replica is counted for the autoscaler (``CallCounter``), and each
call that waited on a cold start by its outcome (``served``, ``refused``) for ``/metrics``."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, overload

from modelport.clock import Clock
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
COLD_START = "cold_start"


@dataclass
class ColdStart:
    """How a call for a version with no ready replica gets one (see the module).
    ``wake(ref)``: wakes ``ref`` if the pool holds it, and says whether it does."""

    view: PoolView
    wake: Callable[[str], bool]
    clock: Clock
    retry_after_seconds: float = 5.0
    counted: Callable[[str, str], object] | None = None
    """Told ``(ref, outcome)`` of each call that waited: ``served`` or ``refused``."""

    async def ready(self, ref: str, deadline: float) -> WorkerInfo | None:
        """A worker holding ``ref`` ready, once one is, by ``deadline`` (the clock's
        monotonic); None: ``ref`` is not the pool's to wake."""
        found = self.view.ready(ref)
        if found:
            return found[0]
        # Off the loop: the wake is a Redis round trip, which may hang until its timeout.
        if not await asyncio.to_thread(self.wake, ref):
            return None
        loop = asyncio.get_running_loop()
        changed = asyncio.Event()

        def on_change() -> None:
            loop.call_soon_threadsafe(changed.set)

        self.view.on_change(on_change)
        try:
            while True:
                found = self.view.ready(ref)
                if found:
                    self._count(ref, "served")
                    return found[0]
                left = deadline - self.clock.monotonic()
                if left <= 0:
                    self._count(ref, "refused")
                    raise Unavailable(
                        f"{ref} is starting on the pool and was not ready within the "
                        "call's deadline",
                        code=COLD_START,
                        scope="version",
                        retry_after=self.retry_after_seconds,
                    )
                timer = asyncio.ensure_future(self.clock.sleep(left))
                waiter = asyncio.ensure_future(changed.wait())
                try:
                    await asyncio.wait({timer, waiter}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    for task in (timer, waiter):
                        task.cancel()
                        with contextlib.suppress(asyncio.CancelledError):
                            await task
                changed.clear()
        finally:
            self.view.off_change(on_change)

    def _count(self, ref: str, outcome: str) -> None:
        if self.counted is not None:
            self.counted(ref, outcome)


class NoReadyReplica:
    """Stands for a version with no ready replica on a live worker."""

    def __init__(
        self,
        ref: str,
        formats: frozenset[str],
        hardware: frozenset[str],
        *,
        cold: ColdStart | None = None,
        make: Callable[[WorkerInfo], Backend] | None = None,
    ) -> None:
        self.name = f"pool:{ref}"
        # As capable as the version needs: its refusal, not a capability miss, is the answer.
        self._capabilities = Capabilities(
            formats=formats, max_batch_size=1 << 20, hardware=hardware
        )
        self._ref = ref
        self._cold = cold
        self._make = make

    async def _replica(self, deadline: float) -> Backend:
        if self._cold is None or self._make is None:
            raise self._refusal()
        worker = await self._cold.ready(self._ref, deadline)
        if worker is None:
            raise self._refusal()
        return self._make(worker)

    def capabilities(self) -> Capabilities:
        return self._capabilities

    async def health(self) -> Health:
        return Health.HEALTHY

    async def infer(self, request: BackendRequest) -> BackendResponse:
        replica = await self._replica(request.deadline)
        return await replica.infer(request)

    async def stream(self, request: StreamRequest) -> AsyncIterator[StreamChunk]:
        replica = await self._replica(request.deadline)
        chunks = replica.stream(request)
        try:
            async for chunk in chunks:
                yield chunk
        finally:  # a caller gone: the worker's stream is cancelled now, not at collection
            close = getattr(chunks, "aclose", None)
            if close is not None:
                await close()

    async def close(self) -> None:
        return None

    def _refusal(self) -> Unavailable:
        return Unavailable(
            f"{self._ref} has no ready replica on a live worker",
            code=NO_READY_REPLICA,
            scope="version",
            retry_after=1,
        )


class CountedBackend:
    """A worker's backend whose calls are counted per version (``record(ref)``)."""

    def __init__(self, inner: Backend, record: Callable[[str], object]) -> None:
        self.inner = inner
        self.name = inner.name
        self._record = record

    def capabilities(self) -> Capabilities:
        return self.inner.capabilities()

    async def health(self) -> Health:
        return await self.inner.health()

    async def infer(self, request: BackendRequest) -> BackendResponse:
        self._record(request.version.ref)
        return await self.inner.infer(request)

    def stream(self, request: StreamRequest) -> AsyncIterator[StreamChunk]:
        self._record(request.version.ref)
        return self.inner.stream(request)

    async def close(self) -> None:
        await self.inner.close()

    def __getattr__(self, name: str) -> Any:
        # What the dispatcher asks of some backends (``keeps_deadline``...) is the inner one's.
        return getattr(self.inner, name)


class LiveReplicas(Sequence[Backend]):
    """``version``'s ready replicas now, the first one in turn (see the module)."""

    def __init__(
        self,
        version: VersionRef,
        view: PoolView,
        make: Callable[[WorkerInfo], Backend],
        cold: ColdStart | None = None,
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
            cold=cold,
            make=make,
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

    def __init__(
        self,
        view: PoolView,
        make: Callable[[WorkerInfo], Backend],
        *,
        record: Callable[[str], object] | None = None,
        cold: ColdStart | None = None,
    ) -> None:
        self.view = view
        self._inner = make
        self._record = record
        self._cold = cold
        self._counted: dict[str, CountedBackend] = {}
        self._made: dict[tuple[str, str], LiveReplicas] = {}

    def _make(self, worker: WorkerInfo) -> Backend:
        inner = self._inner(worker)
        if self._record is None:
            return inner
        counted = self._counted.get(worker.id)
        if counted is None or counted.inner is not inner:
            if len(self._counted) > 2 * len(self.view.workers) + 16:
                self._counted = {k: v for k, v in self._counted.items() if k in self.view.workers}
            counted = self._counted[worker.id] = CountedBackend(inner, self._record)
        return counted

    def __call__(self, version: VersionRef) -> Sequence[Backend]:
        key = (version.ref, version.manifest_digest)
        found = self._made.get(key)
        if found is None:
            found = self._made[key] = LiveReplicas(version, self.view, self._make, self._cold)
        return found
