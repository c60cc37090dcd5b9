"""What the ``/v2`` routes do, apart from HTTP: find a version, ready it, run it.

The routes only translate between HTTP and these calls. A model is addressed as
``owner/name`` with an optional version (a version string or an alias); without
one, the registry's ``resolve(owner, name, None)`` picks the default. Registry
answers are cached for ``resolve_ttl`` seconds so the hot path rarely touches the
database: an alias moved to another version takes effect within that time (and
the one refresh it takes).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from modelport.errors import NotFound, Unavailable
from modelport.manifest import Manifest
from modelport.registry.service import RegistryService
from modelport.registry.types import ModelVersion
from modelport.runtime.cache import BlobSource
from modelport.runtime.host import ModelHost
from modelport.runtime.observer import RuntimeObserver, VersionObserver
from modelport.runtime.types import InferenceResult, LoadState, Priority, VersionKey, VersionStatus

_INDEX_STATE = {
    LoadState.LOADING: "LOADING",
    LoadState.READY: "READY",
    LoadState.FAILED: "UNAVAILABLE",  # Triton's word for a model that failed to load
    LoadState.UNLOADING: "UNLOADING",
}


@dataclass(frozen=True)
class Target:
    """A resolved version: what to validate against and where it is hosted."""

    model: str
    version: str
    manifest: Manifest
    key: VersionKey
    observer: VersionObserver


class DataPlane:
    """Resolves, loads and runs versions for the Open Inference Protocol surface."""

    def __init__(
        self,
        registry: RegistryService,
        host: ModelHost,
        blobs: BlobSource,
        observer: RuntimeObserver,
        *,
        load_on_demand: bool = True,
        resolve_ttl: float = 1.0,
    ) -> None:
        self.registry = registry
        self.host = host
        self.blobs = blobs
        self.observer = observer
        self.load_on_demand = load_on_demand
        self.resolve_ttl = resolve_ttl
        self._targets: dict[tuple[str, str, str | None], tuple[float, Target]] = {}
        self._lookups: dict[tuple[str, str, str | None], asyncio.Future[Target]] = {}

    # ---- resolution
    async def target(self, owner: str, name: str, version: str | None) -> Target:
        """The version ``owner/name`` [``version``] names (NotFound when there is none).

        An answer older than ``resolve_ttl`` is still returned while one refresh runs
        for every caller (a busy model would otherwise send each of its concurrent
        callers to the database at every expiry); with no answer yet, callers share
        one lookup."""
        cache_key = (owner, name, version)
        cached = self._targets.get(cache_key)
        if cached is not None:
            if cached[0] <= time.monotonic():
                self._lookup(cache_key)
            return cached[1]
        return await asyncio.shield(self._lookup(cache_key))

    def _lookup(self, cache_key: tuple[str, str, str | None]) -> asyncio.Future[Target]:
        loop = asyncio.get_running_loop()
        pending = self._lookups.get(cache_key)
        if pending is not None and pending.get_loop() is loop:
            return pending
        lookup = loop.create_task(self._resolve(cache_key))
        lookup.add_done_callback(_retrieve)  # a refresh nobody awaits may fail quietly
        self._lookups[cache_key] = lookup
        return lookup

    async def _resolve(self, cache_key: tuple[str, str, str | None]) -> Target:
        try:
            found = await asyncio.to_thread(self.registry.resolve, *cache_key)
        except BaseException:
            self._targets.pop(cache_key, None)  # gone or failing: the next call asks again
            raise
        finally:
            self._lookups.pop(cache_key, None)
        target = self._target(found)
        if len(self._targets) > 4096:  # many distinct names: start over rather than grow
            self._targets.clear()
        self._targets[cache_key] = (time.monotonic() + self.resolve_ttl, target)
        return target

    def _target(self, found: ModelVersion) -> Target:
        model = f"{found.owner}/{found.name}"
        return Target(
            model=model,
            version=found.version,
            manifest=found.manifest,
            key=VersionKey(model, found.version, found.manifest_digest),
            observer=self.observer.version(model, found.version),
        )

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

    # ---- inference
    async def infer(
        self,
        target: Target,
        inputs: Mapping[str, np.ndarray],
        *,
        deadline: float,
        priority: Priority,
        parameters: Mapping[str, Any] | None,
    ) -> InferenceResult:
        return await self.host.infer(
            target.key, inputs, deadline=deadline, priority=priority, parameters=parameters
        )

    # ---- readiness and metadata
    async def ready(self, owner: str, name: str, version: str | None) -> tuple[Target, bool]:
        target = await self.target(owner, name, version)
        return target, self.host.is_ready(target.key)

    async def versions(self, owner: str, name: str) -> list[str]:
        found = await asyncio.to_thread(self.registry.list_versions, owner, name)
        return [v.version for v in found]

    # ---- repository
    async def load(
        self, owner: str, name: str, version: str | None, *, pinned: bool = False
    ) -> VersionStatus:
        target = await self.target(owner, name, version)
        done = self.host.start_load(target.key, target.manifest, self.blobs, pinned=pinned)
        return await asyncio.shield(asyncio.wrap_future(done))

    async def unload(self, owner: str, name: str, version: str | None) -> list[VersionKey]:
        """Unload one version, or without ``version`` every hosted version of the model."""
        model = f"{owner}/{name}"
        if version is not None:
            keys = [(await self.target(owner, name, version)).key]
        else:
            keys = [s.key for s in self.host.statuses() if s.key.model == model]
        keys = [k for k in keys if self.host.status(k) is not None]
        if not keys:
            raise NotFound(f"{model} has no loaded version", code="model_not_loaded")
        for key in keys:
            await asyncio.to_thread(self.host.unload, key)
        return keys

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


def _retrieve(task: asyncio.Future[Target]) -> None:
    if not task.cancelled():
        task.exception()
