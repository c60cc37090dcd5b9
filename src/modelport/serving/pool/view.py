"""A gateway's view of the live workers: the registry read every ``refresh_seconds``
on the periodic-task primitive, so no call waits on Redis and the view is never older
than one refresh (plus Redis's own lease)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from types import MappingProxyType

from modelport.background.loops import BackgroundLoop
from modelport.clock import Clock
from modelport.serving.pool.registry import WorkerRegistry
from modelport.serving.pool.types import WorkerInfo

_log = logging.getLogger(__name__)


class PoolView:
    """The live workers by id, swapped whole at each refresh; ``on_change`` listeners
    run (on the refresh thread) when the set of workers or their versions changed."""

    def __init__(
        self,
        registry: WorkerRegistry,
        *,
        refresh_seconds: float = 1.0,
        clock: Clock | None = None,
    ) -> None:
        self.registry = registry
        self._workers: MappingProxyType[str, WorkerInfo] = MappingProxyType({})
        self._listeners: list[Callable[[], object]] = []
        self.fresh = False
        """Whether the registry has been read at least once."""
        self.loop = BackgroundLoop(
            "worker pool view", self.refresh, refresh_seconds, clock=clock, max_backoff=1.0
        )

    @property
    def workers(self) -> MappingProxyType[str, WorkerInfo]:
        return self._workers

    def on_change(self, listener: Callable[[], object]) -> None:
        self._listeners.append(listener)

    def off_change(self, listener: Callable[[], object]) -> None:
        """Stop calling ``listener`` (a call waiting for a replica gave up or got one)."""
        self._listeners = [x for x in self._listeners if x is not listener]

    def refresh(self) -> None:
        """Read the registry now (a failure keeps the last view, and is raised)."""
        found = {info.id: info for info in self.registry.live()}
        changed = found != dict(self._workers)
        self._workers = MappingProxyType(found)
        self.fresh = True
        if changed:
            for listener in list(self._listeners):
                try:
                    listener()
                except Exception:
                    _log.exception("a worker pool listener failed")

    def ready(self, ref: str) -> Sequence[WorkerInfo]:
        """The live workers that hold ``ref`` ready, by id."""
        return sorted((w for w in self._workers.values() if w.ready(ref)), key=lambda w: w.id)

    def predicted_wait(self, ref: str) -> float | None:
        """``ref``'s predicted queue wait, the mean over its ready replicas (as their
        last heartbeats said); None with none ready."""
        ready = self.ready(ref)
        if not ready:
            return None
        return sum(w.waits.get(ref, 0.0) for w in ready) / len(ready)

    def start(self) -> None:
        try:
            self.refresh()
        except Exception:
            _log.exception("the worker pool view could not be read; retrying")
        self.loop.start()

    def stop(self) -> None:
        self.loop.stop()
