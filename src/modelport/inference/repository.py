"""The model repository (the ``/v2`` repository extension and readiness): which
versions this process hosts, loading and unloading them, versions resolved through
``VersionTargets``.

Repository loads and unloads reach every process that serves the platform: after a
local one succeeds it is published on the ``RepositorySync``, and the changes other
processes publish are applied here (see ``syncing``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Coroutine
from concurrent.futures import Future
from contextlib import asynccontextmanager
from typing import Any, Protocol, TypeVar

from modelport.background.single_flight import retrieve_failure
from modelport.errors import NotFound, Unavailable
from modelport.inference.targets import Target, VersionTargets
from modelport.observability.types import VersionStatistics
from modelport.runtime.cache import BlobSource
from modelport.runtime.host import ModelHost
from modelport.runtime.types import LoadState, VersionKey, VersionStatus
from modelport.serving.placement import ROLE_LACKS_SERVICE
from modelport.serving.repository_sync import (
    Action,
    LocalRepositorySync,
    RepositoryChange,
    RepositorySync,
)

_log = logging.getLogger(__name__)
T = TypeVar("T")

_INDEX_STATE = {
    LoadState.LOADING: "LOADING",
    LoadState.READY: "READY",
    LoadState.FAILED: "UNAVAILABLE",  # Triton's word for a model that failed to load
    LoadState.UNLOADING: "UNLOADING",
}


class StatisticsSource(Protocol):
    """What the runtime measured of the versions (``observability.metrics.RuntimeMetrics``)."""

    def statistics(self, model: str | None = None) -> list[VersionStatistics]:
        """Every version observed (of ``model``, ``owner/name``, when given)."""
        ...


class ModelRepository:
    """The model repository of this process: which versions are hosted, loading and
    unloading them here and in every process sharing the sync."""

    def __init__(
        self,
        targets: VersionTargets,
        host: ModelHost | None,
        blobs: BlobSource,
        *,
        load_on_demand: bool = True,
        sync: RepositorySync | None = None,
        role: str = "all",
        statistics: StatisticsSource | None = None,
    ) -> None:
        """``host`` None: a process that hosts no models (a gateway), whose repository
        answers 503 ``role_lacks_service`` to everything that needs the host.
        ``statistics``: what the runtime measured (none: every figure is 0)."""
        self.targets = targets
        self._host = host
        self.role = role
        self.blobs = blobs
        self.load_on_demand = load_on_demand
        self.sync: RepositorySync = sync or LocalRepositorySync()
        self._statistics = statistics

    @property
    def host(self) -> ModelHost:
        """This process's model host (503 ``role_lacks_service`` where there is none)."""
        if self._host is None:
            raise Unavailable(
                f"this process ({self.role}) hosts no models: /v2 is served by the "
                "platform's workers, and endpoints by their deployments' remote backends",
                code=ROLE_LACKS_SERVICE,
                role=self.role,
            )
        return self._host

    async def target(self, owner: str, name: str, version: str | None) -> Target:
        return await self.targets.target(owner, name, version)

    async def ensure_ready(self, target: Target) -> None:
        """Make sure a resolved version is loaded (loading it on demand if allowed)."""
        if self.host.is_ready(target.key):
            return
        if not self.load_on_demand and self.host.status(target.key) is None:
            raise Unavailable(
                f"{target.key.ref} is not loaded (load it through the repository API)",
                code="model_not_loaded",
            )
        await self.host.ensure_loaded(target.key, target.manifest, self.blobs)

    # ---- readiness and metadata
    async def ready(self, owner: str, name: str, version: str | None) -> tuple[Target, bool]:
        target = await self.target(owner, name, version)
        return target, self.host.is_ready(target.key)

    async def versions(self, owner: str, name: str) -> list[str]:
        found = await asyncio.to_thread(self.targets.registry.list_versions, owner, name)
        return [v.version for v in found]

    async def statistics(
        self, owner: str, name: str, version: str | None
    ) -> list[VersionStatistics]:
        """This process's figures of one version, or of every version of the model it
        has observed (the default version's, all 0, when none)."""
        observed = self._statistics.statistics(f"{owner}/{name}") if self._statistics else []
        if version is None and observed:
            return observed
        target = await self.target(owner, name, version)
        found = [s for s in observed if s.version == target.version]
        return found or [VersionStatistics(target.model, target.version)]

    def all_statistics(self) -> list[VersionStatistics]:
        """This process's figures of every version it has observed."""
        return self._statistics.statistics() if self._statistics else []

    # ---- repository
    async def load(
        self, owner: str, name: str, version: str | None, *, pinned: bool = False
    ) -> VersionStatus:
        target = await self.target(owner, name, version)
        done = self.host.start_load(target.key, target.manifest, self.blobs, pinned=pinned)
        return await _shielded(self._loaded(done, target.key, pinned))

    async def _loaded(
        self, done: Future[VersionStatus], key: VersionKey, pinned: bool
    ) -> VersionStatus:
        status = await asyncio.wrap_future(done)
        await self._publish("load", key.model, key.version, pinned=pinned)
        return status

    async def unload(self, owner: str, name: str, version: str | None) -> list[VersionKey]:
        """Unload one version, or without ``version`` every hosted version of the model,
        here and in every process sharing the sync. Answers the versions unloaded here;
        404 when there is none and no other process could host one."""
        model = f"{owner}/{name}"
        wanted = None if version is None else (await self.target(owner, name, version)).key
        if wanted is not None:
            keys = [wanted]
        else:
            keys = [s.key for s in self.host.statuses() if s.key.model == model]
        keys = [k for k in keys if self.host.status(k) is not None]
        if not keys and not self.sync.shared:
            raise NotFound(f"{model} has no loaded version", code="model_not_loaded")
        # Told to the others even when nothing is hosted here: a version loaded on
        # demand by another process is theirs to unload.
        await _shielded(self._unloaded(model, keys, wanted))
        return keys

    async def _unloaded(
        self, model: str, keys: list[VersionKey], wanted: VersionKey | None
    ) -> None:
        for key in keys:
            await asyncio.to_thread(self.host.unload, key)
        await self._publish("unload", model, None if wanted is None else wanted.version)

    async def _publish(
        self, action: Action, model: str, version: str | None, *, pinned: bool = False
    ) -> None:
        if not self.sync.shared:
            return  # one process: nobody to tell
        change = RepositoryChange(action, model, version, pinned=pinned, origin=self.sync.origin)
        await asyncio.to_thread(self.sync.publish, change)  # a network round trip

    # ---- other processes' repository changes
    @asynccontextmanager
    async def syncing(self) -> AsyncIterator[None]:
        """Apply other processes' changes on this event loop while the block runs.

        The subscriber's thread only queues a change; one task applies them in the order
        received, so a quick load-then-unload elsewhere ends unloaded here too."""
        if self._host is None:  # nothing hosted here: nothing to follow
            yield
            return
        loop = asyncio.get_running_loop()
        changes: asyncio.Queue[RepositoryChange] = asyncio.Queue()

        def receive(change: RepositoryChange) -> None:  # on the subscriber's thread
            loop.call_soon_threadsafe(changes.put_nowait, change)

        self.sync.start(receive)
        applier = loop.create_task(self._apply_all(changes), name="repository-sync")
        try:
            yield
        finally:
            await asyncio.to_thread(self.sync.close)  # joins the subscriber's thread
            applier.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await applier

    async def _apply_all(self, changes: asyncio.Queue[RepositoryChange]) -> None:
        while True:
            change = await changes.get()
            try:
                await self.apply(change)
            except Exception:  # a bug for one change must not stop the next ones
                _log.exception("could not apply %s", change)

    async def apply(self, change: RepositoryChange) -> None:
        """Apply another process's change here: start its load (without waiting for it),
        or unload the version if it is hosted. Failures are logged, never raised."""
        if change.action == "unload":
            if change.version is None:
                keys = [s.key for s in self.host.statuses() if s.key.model == change.model]
            else:
                found = self.host.find(change.model, change.version)
                keys = [] if found is None else [found]  # not hosted here: nothing to do
            for key in keys:
                with contextlib.suppress(NotFound):  # unloaded meanwhile
                    await asyncio.to_thread(self.host.unload, key)
            return
        ref = f"{change.model}:{change.version}"
        owner, _, name = change.model.partition("/")
        try:
            target = await self.target(owner, name, change.version)
            done = self.host.start_load(
                target.key, target.manifest, self.blobs, pinned=change.pinned
            )
        except Exception as exc:
            _log.warning("could not load %s as process %s did: %s", ref, change.origin, _cause(exc))
            return
        done.add_done_callback(lambda future: _log_failed_load(future, ref, change.origin))

    def index(self, *, ready_only: bool = False) -> list[dict[str, Any]]:
        """Hosted versions with their state and, for a failed one, the reason."""
        rows = []
        for status in sorted(self.host.statuses(), key=lambda s: s.key.ref):
            if ready_only and status.state is not LoadState.READY:
                continue
            rows.append(
                {
                    "name": status.key.model,
                    "version": status.key.version,
                    "state": _INDEX_STATE[status.state],
                    "reason": status.cause or "",
                }
            )
        return rows


def _cause(exc: BaseException) -> str:
    return str(getattr(exc, "message", None) or exc) or type(exc).__name__


def _log_failed_load(done: Future[VersionStatus], ref: str, origin: str) -> None:
    if not done.cancelled() and (exc := done.exception()) is not None:
        _log.warning("could not load %s as process %s did: %s", ref, origin, _cause(exc))


async def _shielded(work: Coroutine[Any, Any, T]) -> T:
    """Run ``work`` to the end even if the caller goes away: the other processes hear of
    a load or unload that happened here, whether or not its caller waited for it."""
    task = asyncio.ensure_future(work)
    task.add_done_callback(retrieve_failure)
    return await asyncio.shield(task)
