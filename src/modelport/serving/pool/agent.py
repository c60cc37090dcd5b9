"""A worker's side of the pool: it announces itself and loads what is placed on it.

Two steps on the periodic-task primitive, so a slow database never delays the lease:

- the **heartbeat** (every ``heartbeat_seconds``) announces the worker in the registry
  under a lease of ``lease_seconds``: its address, pool, memory, hardware, formats and
  engines, each held version's load state, queue and predicted queue wait (the
  autoscaling signal);
- the **placement sync** (every ``sync_seconds``, and kicked by each heartbeat) reads the
  worker's placements from the database, starts loading those not held (pinned, from
  the blob store through the verified local cache), records each one's state
  (``loading``, ``ready``, ``failed`` with its cause), and unloads what it holds that is
  no longer placed on it. A generative version (one a generative engine serves) is
  held by ``GenerativeHolds`` instead of the model host, and announced the same way.

``stop`` withdraws the worker from the registry at once; a killed worker's lease lapses
on its own.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from modelport.background.loops import BackgroundLoop
from modelport.clock import Clock
from modelport.errors import ModelportError
from modelport.logs import log_event
from modelport.runtime.cache import BlobSource
from modelport.runtime.host import ModelHost
from modelport.runtime.types import LoadState, VersionKey
from modelport.serving.placement import key_of
from modelport.serving.pool.generative import GenerativeHolds
from modelport.serving.pool.placements import PlacementRepository
from modelport.serving.pool.registry import WorkerRegistry
from modelport.serving.pool.types import FAILED, LOADING, READY, WorkerInfo
from modelport.serving.types import VersionRef

_log = logging.getLogger(__name__)

_STATE = {LoadState.READY: READY, LoadState.LOADING: LOADING, LoadState.FAILED: FAILED}


@dataclass(frozen=True)
class WorkerIdentity:
    """What a worker announces of itself beyond its versions."""

    id: str
    pool: str = "default"
    accelerators: frozenset[str] = frozenset({"cpu"})
    engines: frozenset[str] = frozenset()


class WorkerAgent:
    """Heartbeat and placement sync of one worker (see the module)."""

    def __init__(
        self,
        identity: WorkerIdentity,
        address: Callable[[], str],
        host: ModelHost,
        blobs: BlobSource,
        registry: WorkerRegistry,
        placements: PlacementRepository,
        resolve: Callable[[str], VersionRef],
        *,
        formats: frozenset[str],
        waits: Callable[[VersionKey], float | None] | None = None,
        heartbeat_seconds: float = 1.0,
        lease_seconds: float = 5.0,
        sync_seconds: float = 1.0,
        clock: Clock | None = None,
        generative: GenerativeHolds | None = None,
    ) -> None:
        if lease_seconds <= heartbeat_seconds:
            raise ValueError("the lease must outlast the heartbeat interval")
        self.identity = identity
        self._address = address
        self.host = host
        self.blobs = blobs
        self.registry = registry
        self.placements = placements
        self._resolve = resolve
        self.formats = formats
        self.generative = generative
        self.waits = waits or self._predicted_wait
        """Predicted queue wait of a held version (None: not held)."""
        self.lease_seconds = lease_seconds
        self._held: dict[str, VersionKey] = {}
        """Versions loaded because they were placed here, by ref."""
        self._recorded: dict[str, str] = {}
        """The state last written to each placement row."""
        self._lock = threading.Lock()
        self.heartbeat = BackgroundLoop(
            "worker heartbeat", self.announce, heartbeat_seconds, clock=clock, max_backoff=0.5
        )
        self.sync_loop = BackgroundLoop(
            "worker placements", self.sync, sync_seconds, clock=clock, max_backoff=1.0
        )

    def _predicted_wait(self, key: VersionKey) -> float | None:
        """The generative scheduler's wait for a version an engine serves, else the
        tensor batchers'."""
        if self.generative is not None:
            wait = self.generative.engines.predicted_wait(key)
            if wait is not None:
                return wait
        return self.host.predicted_wait(key)

    def info(self) -> WorkerInfo:
        """What the next heartbeat announces."""
        versions: dict[str, str] = {}
        queued: dict[str, float] = {}
        waits: dict[str, float] = {}
        used = 0
        statuses = self.host.statuses()
        if self.generative is not None:
            statuses = [*statuses, *self.generative.statuses()]
        for status in statuses:
            ref = status.key.ref
            versions[ref] = _STATE.get(status.state, status.state.value)
            queued[ref] = float(status.queued)
            if status.state is LoadState.READY:
                waits[ref] = self.waits(status.key) or 0.0
            used += status.host_memory_bytes
        return WorkerInfo(
            id=self.identity.id,
            address=self._address(),
            pool=self.identity.pool,
            memory_bytes=self.host.budget.host_bytes,
            accelerators=self.identity.accelerators,
            formats=self.formats,
            engines=self.identity.engines,
            versions=versions,
            queued=queued,
            waits=waits,
            used_bytes=used,
        )

    def announce(self) -> None:
        self.registry.announce(self.info(), self.lease_seconds)
        self.sync_loop.kick()

    def sync(self) -> None:
        """One pass of the placement sync (see the module)."""
        with self._lock:
            placed = self.placements.of_worker(self.identity.id)
            wanted = {p.ref for p in placed}
            for replica in placed:
                state = self._hold(replica.ref)
                if state is not None and self._recorded.get(replica.ref) != state[0]:
                    self.placements.set_state(replica.ref, self.identity.id, *state)
                    self._recorded[replica.ref] = state[0]
            for ref in [r for r in self._held if r not in wanted]:
                key = self._held.pop(ref)
                self._recorded.pop(ref, None)
                log_event(_log, "worker.unplaced", version=ref)
                self._unload(key)

    def _unload(self, key: VersionKey) -> None:
        if self.generative is not None and self.generative.status(key) is not None:
            self.generative.unload(key)
            return
        # Off this thread: draining its calls must not hold the sync up.
        threading.Thread(target=self.host.unload, args=(key,), daemon=True).start()

    def _holder(self, key: VersionKey) -> ModelHost | GenerativeHolds:
        if self.generative is not None and self.generative.status(key) is not None:
            return self.generative
        return self.host

    def _hold(self, ref: str) -> tuple[str, str | None] | None:
        """Load ``ref`` if not held; its state and cause now (None: unknown yet)."""
        key = self._held.get(ref)
        if key is None:
            try:
                version = self._resolve(ref)
                key = key_of(version)
                if self.generative is not None and self.generative.handles(version.manifest):
                    self.generative.start_load(key, version.manifest)
                else:
                    self.host.start_load(key, version.manifest, self.blobs, pinned=True)
            except ModelportError as exc:
                return FAILED, exc.message
            self._held[ref] = key
            log_event(_log, "worker.placed", version=ref)
        status = self._holder(key).status(key)
        if status is None:
            self._held.pop(ref, None)  # unloaded under us (memory pressure): load again
            return LOADING, None
        state = _STATE.get(status.state)
        if state is None:
            return None
        return state, status.cause if state == FAILED else None

    def start(self) -> None:
        self.announce_safely()
        self.heartbeat.start()
        self.sync_loop.start()

    def announce_safely(self) -> None:
        try:
            self.announce()
        except Exception:
            _log.exception("the first worker announcement failed; retrying")

    def stop(self) -> None:
        self.heartbeat.stop()
        self.sync_loop.stop()
        try:
            self.registry.withdraw(self.identity.id)
        except Exception:
            _log.exception("withdrawing the worker failed; its lease lapses on its own")
