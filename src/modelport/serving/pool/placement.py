"""``PoolPlacement``: the ``Placement`` of a gateway whose versions run on the worker
pool.

``place`` records a version as wanted and returns a future that resolves once one of
its replicas is ready on a live worker (or fails after ``place_timeout_seconds``, with
the reason no worker could take it). The placer, a step on the periodic-task primitive
run by every gateway under a short Redis lock (one of them places at a time), keeps
the placements in the database equal to what is wanted: it drops the placements of
workers whose lease lapsed and adds replicas on live workers (``choose``) until each
wanted version has its replicas. The view's changes kick it, so a lost worker's
replicas are placed again within a refresh.

With a ``ScaleStore`` (the autoscaler, ``scaler``), a version's replicas are its target
there, not a fixed number: the placer gives a version it first places its start
(``replicas`` within its deployments' bounds), adds replicas up to the target and
removes those past it (one still loading first, then on the busiest worker). A version
scaled to zero counts as ready to ``place`` (nothing to load until its first call).
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable, Collection, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from modelport.background.loops import BackgroundLoop
from modelport.clock import Clock, SystemClock
from modelport.errors import Unavailable, Unprocessable
from modelport.keyspace import Keyspace
from modelport.logs import log_event
from modelport.manifest import Manifest
from modelport.runtime.types import LoadState, VersionStatus
from modelport.serving.placement import key_of
from modelport.serving.pool.choose import choose
from modelport.serving.pool.placements import PlacementRepository
from modelport.serving.pool.scaling import Bounds
from modelport.serving.pool.types import FAILED, READY, PlacedReplica, Wanted
from modelport.serving.pool.view import PoolView
from modelport.serving.types import VersionRef

if TYPE_CHECKING:
    from modelport.serving.pool.scaler import ScaleStore

_log = logging.getLogger(__name__)

NO_WORKER_FITS = "no_worker_fits"


class PlacerLock:
    """One placer at a time among the gateways: ``SET NX PX`` on ``…:workers:placer``."""

    def __init__(
        self, client: Any, keys: Keyspace, holder: str, ttl_seconds: float, name: str = "placer"
    ) -> None:
        self.client = client
        self.name = keys.name("workers", name)
        self.holder = holder
        self.ttl_ms = max(1, math.ceil(ttl_seconds * 1000))

    def acquire(self) -> bool:
        if self.client.set(self.name, self.holder, nx=True, px=self.ttl_ms):
            return True
        held = self.client.get(self.name)
        return (held.decode() if isinstance(held, bytes) else held) == self.holder

    def release(self) -> None:
        # Only our own hold is released (a lapsed hold may be another gateway's by now).
        self.client.eval(
            "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) "
            "end return 0",
            1,
            self.name,
            self.holder,
        )


@dataclass
class _Want:
    ref: VersionRef
    wanted: Wanted
    since: float
    waiting: list[Future[VersionStatus]] = field(default_factory=list)
    why: str = ""


class PoolPlacement:
    """The ``Placement`` of a gateway over the worker pool (see the module)."""

    def __init__(
        self,
        view: PoolView,
        repository: PlacementRepository,
        lock: PlacerLock,
        *,
        estimate: Callable[[Manifest], int],
        replicas: int = 2,
        pool: str = "default",
        clock: Clock | None = None,
        reconcile_seconds: float = 1.0,
        place_timeout_seconds: float = 120.0,
        scale: ScaleStore | None = None,
        bounds: Callable[[], Mapping[str, Bounds]] | None = None,
    ) -> None:
        self.view = view
        self.repository = repository
        self.lock = lock
        self._estimate = estimate
        self.replicas = replicas
        self.pool = pool
        self.clock = clock or SystemClock()
        self.place_timeout_seconds = place_timeout_seconds
        self.scale = scale
        self._bounds = bounds or dict
        self._known_targets: dict[str, int] = {}
        """The autoscaler's targets as the placer last read them (``place`` reads these:
        it runs on the event loop, where a Redis round trip must not)."""
        self._wants: dict[str, _Want] = {}
        self._guard = threading.Lock()
        self._passes = threading.Lock()
        self.loop = BackgroundLoop(
            "worker placer", self.reconcile, reconcile_seconds, clock=clock, max_backoff=1.0
        )
        view.on_change(self.loop.kick)

    # ---- Placement
    def capacity(self) -> int | None:
        workers = [w for w in self.view.workers.values() if w.pool == self.pool]
        if any(w.memory_bytes is None for w in workers):
            return None
        return sum(w.memory_bytes or 0 for w in workers)

    def fits(self, needed_bytes: int, refs: Collection[str]) -> None:
        capacity = self.capacity()
        needed = needed_bytes * self.replicas
        if capacity is not None and refs and needed > capacity:
            raise Unprocessable(
                f"the deployments would need {needed} bytes over {self.replicas} replicas "
                f"each; the live workers of pool {self.pool!r} have {capacity}",
                code="insufficient_memory",
                needed_bytes=needed,
                budget_bytes=capacity,
            )

    def estimate(self, manifest: Manifest) -> int:
        return self._estimate(manifest)

    def place(self, ref: VersionRef) -> Future[VersionStatus]:
        manifest = ref.manifest
        with self._guard:
            want = self._wants.get(ref.ref)
            if want is None:
                hardware = frozenset(manifest.resources.hardware or ("cpu",))
                want = self._wants[ref.ref] = _Want(
                    ref,
                    Wanted(
                        ref=ref.ref,
                        manifest_digest=ref.manifest_digest,
                        format=manifest.format,
                        memory_bytes=manifest.resources.host_memory_bytes
                        or self._estimate(manifest),
                        replicas=self.replicas,
                        pool=self.pool,
                        hardware=hardware,
                    ),
                    self.clock.monotonic(),
                )
            done: Future[VersionStatus] = Future()
            if self.view.ready(ref.ref):
                done.set_result(self._status(want, LoadState.READY))
            elif self._scaled_to_zero(ref.ref):
                done.set_result(self._zero_status(want))
            else:
                want.waiting.append(done)
        self.loop.kick()
        return done

    def status(self, ref: VersionRef) -> VersionStatus | None:
        want = self._wants.get(ref.ref)
        if want is None:
            return None
        ready = bool(self.view.ready(ref.ref))
        return self._status(want, LoadState.READY if ready else LoadState.LOADING)

    def _scaled_to_zero(self, ref: str) -> bool:
        return self.scale is not None and self._known_targets.get(ref) == 0

    def _zero_status(self, want: _Want) -> VersionStatus:
        return replace(
            self._status(want, LoadState.READY), warm_up="scaled to zero: loads on its first call"
        )

    def wanted_refs(self) -> list[str]:
        """The versions this gateway holds on the pool."""
        with self._guard:
            return list(self._wants)

    def wants(self, ref: str) -> bool:
        return ref in self._wants

    def lookup(self, model: str, version: str) -> VersionStatus | None:
        want = self._wants.get(f"{model}:{version}")
        return None if want is None else self.status(want.ref)

    def release(self, ref: VersionRef) -> None:
        with self._guard:
            want = self._wants.pop(ref.ref, None)
        if want is not None:
            for waiting in want.waiting:
                if not waiting.done():
                    waiting.set_exception(
                        Unavailable(f"{ref.ref} was released", code="model_unloading")
                    )
        self.repository.drop_refs([ref.ref])
        if self.scale is not None:
            try:
                self.scale.forget([ref.ref])
            except Exception:
                # Redis unreachable: the stale state is only read again if the version
                # is placed again (its start kept, its idle time long past): harmless.
                _log.warning("the autoscaler's state of %s was not dropped", ref.ref, exc_info=True)

    # ---- the placer
    def reconcile(self) -> None:
        """One pass of the placer (see the module); then settle the waiting futures."""
        if not self.view.fresh:
            return  # never read the registry yet: it would look as if every worker left
        with self._passes:  # one pass at a time here; the Redis lock is per gateway
            self._reconcile()

    def _reconcile(self) -> None:
        placed: list[PlacedReplica] | None = None
        self._read_targets()
        if self.lock.acquire():
            try:
                placed = self._place()
            finally:
                self.lock.release()
        self._settle(placed)

    def _place(self) -> list[PlacedReplica]:
        workers = self.view.workers
        placed = self.repository.all()
        lapsed = {p.worker_id for p in placed if p.worker_id not in workers}
        if lapsed:
            dropped = self.repository.drop_workers(lapsed)
            log_event(_log, "workers.lapsed", workers=",".join(sorted(lapsed)), dropped=dropped)
            placed = [p for p in placed if p.worker_id not in lapsed]
        by_worker: dict[str, list[PlacedReplica]] = {w: [] for w in workers}
        for replica in placed:
            by_worker[replica.worker_id].append(replica)
        with self._guard:
            wants = list(self._wants.values())
        targets = self._targets(wants)
        for want in wants:
            wanted = replace(want.wanted, replicas=targets.get(want.wanted.ref, self.replicas))
            placed = self._remove_surplus(wanted, placed, by_worker)
            choice = choose(wanted, list(workers.values()), by_worker)
            for worker_id in choice.workers:
                self.repository.add(
                    wanted.ref, wanted.manifest_digest, worker_id, wanted.memory_bytes
                )
                new = PlacedReplica(
                    wanted.ref,
                    wanted.manifest_digest,
                    worker_id,
                    memory_bytes=wanted.memory_bytes,
                )
                by_worker[worker_id].append(new)
                placed.append(new)
                log_event(_log, "workers.placed", version=wanted.ref, worker=worker_id)
            want.why = choice.reason
        return placed

    def _targets(self, wants: list[_Want]) -> dict[str, int]:
        """Each wanted version's replicas: its autoscaler target, set first to the
        start (``replicas`` within its deployments' bounds) for a version it has none."""
        if self.scale is None:
            return {w.wanted.ref: w.wanted.replicas for w in wants}
        targets = self.scale.targets()
        missing = [w.wanted.ref for w in wants if w.wanted.ref not in targets]
        if missing:
            bounds = self._bounds()
            for ref in missing:
                limit = bounds.get(ref, Bounds(1, self.replicas))
                start = min(max(self.replicas, limit.min, 1), max(limit.max, 1))
                targets[ref] = self.scale.initial(ref, start, self.clock.now().timestamp())
        return targets

    def _remove_surplus(
        self,
        wanted: Wanted,
        placed: list[PlacedReplica],
        by_worker: dict[str, list[PlacedReplica]],
    ) -> list[PlacedReplica]:
        """Drop ``wanted``'s replicas past its target: those not ready first, then those
        on the workers holding the most."""
        mine = [p for p in placed if p.ref == wanted.ref]
        surplus = len(mine) - wanted.replicas
        if surplus <= 0:
            return placed
        mine.sort(key=lambda p: (p.state == READY, -len(by_worker[p.worker_id]), p.worker_id))
        gone = mine[:surplus]
        for replica in gone:
            self.repository.drop(replica.ref, replica.worker_id)
            by_worker[replica.worker_id].remove(replica)
            log_event(_log, "workers.unplaced", version=replica.ref, worker=replica.worker_id)
        return [p for p in placed if p not in gone]

    def _read_targets(self) -> None:
        """Keep the autoscaler's targets for ``place`` (the last ones read, if Redis is
        unreachable now)."""
        if self.scale is None:
            return
        try:
            self._known_targets = self.scale.targets()
        except Exception:
            _log.warning("the autoscaler's targets could not be read", exc_info=True)

    def _settle(self, placed: list[PlacedReplica] | None) -> None:
        now = self.clock.monotonic()
        with self._guard:
            wants = [w for w in self._wants.values() if w.waiting]
        for want in wants:
            ref = want.ref.ref
            error: Unavailable | None = None
            if self.view.ready(ref):
                result = self._status(want, LoadState.READY)
            elif self._scaled_to_zero(ref):
                result = self._zero_status(want)
            else:
                mine = [p for p in placed or () if p.ref == ref]
                if mine and all(p.state == FAILED for p in mine):
                    error = Unavailable(
                        f"{ref} failed to load on every worker: {mine[0].cause}",
                        code="model_load_failed",
                    )
                elif now - want.since >= self.place_timeout_seconds:
                    error = Unavailable(
                        f"{ref} is not ready on any worker: {want.why or 'no replica placed'}",
                        code=NO_WORKER_FITS,
                    )
                else:
                    continue
            with self._guard:
                waiting, want.waiting = want.waiting, []
            for future in waiting:
                if future.done():
                    continue
                if error is None:
                    future.set_result(result)
                else:
                    future.set_exception(error)

    def _status(self, want: _Want, state: LoadState) -> VersionStatus:
        return VersionStatus(
            key=key_of(want.ref),
            state=state,
            pinned=True,
            host_memory_bytes=want.wanted.memory_bytes,
            memory_source="estimated",
            warm_up=f"on {len(self.view.ready(want.ref.ref))} worker(s)",
        )

    def start(self) -> None:
        self.loop.start()

    def stop(self) -> None:
        self.loop.stop()
