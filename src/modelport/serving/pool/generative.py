"""A worker's generative versions, held as its placements ask: the agent's thread
starts their loads and reads their states; the loads run on the worker's serving loop
(``bind``), where its streams run, since a ``GenerativeHost`` shares its loads per
event loop (``serving.generative_placement``)."""

from __future__ import annotations

import asyncio
from concurrent.futures import Future

from modelport.manifest import Manifest
from modelport.runtime.cache import BlobSource
from modelport.runtime.engines import GenerativeHost
from modelport.runtime.types import LoadState, VersionKey, VersionStatus
from modelport.serving.generative_placement import GenerativePlacement, is_generative


class GenerativeHolds:
    """Loads, states and unloads of a worker's generative versions (see the module)."""

    def __init__(self, engines: GenerativeHost, blobs: BlobSource) -> None:
        self.engines = engines
        self._placement = GenerativePlacement(engines, blobs)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pending: set[VersionKey] = set()

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """The event loop the worker serves on (set before the agent starts)."""
        self._loop = loop

    def handles(self, manifest: Manifest) -> bool:
        return is_generative(manifest, self.engines)

    def start_load(self, key: VersionKey, manifest: Manifest) -> None:
        """Begin loading ``key`` on the serving loop (from any thread)."""
        if self._loop is None:
            raise RuntimeError("bind the serving loop before loading generative versions")
        self._pending.add(key)

        async def place() -> None:
            future: Future[VersionStatus] = self._placement.place(key, manifest)
            future.add_done_callback(lambda _: self._pending.discard(key))

        asyncio.run_coroutine_threadsafe(place(), self._loop)

    def status(self, key: VersionKey) -> VersionStatus | None:
        found = self._placement.status(key)
        if found is None and key in self._pending:
            return VersionStatus(key, LoadState.LOADING, pinned=True)
        return found

    def statuses(self) -> list[VersionStatus]:
        keys = {*self._pending, *self._placement.keys()}
        return [s for k in sorted(keys, key=lambda k: k.ref) if (s := self.status(k))]

    def unload(self, key: VersionKey) -> None:
        """Unload ``key`` (on the serving loop, where its engine is used)."""
        self._pending.discard(key)
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._placement.release, key)
