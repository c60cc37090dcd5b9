"""One read at a time per key: concurrent callers on an event loop share it.

The hot path's caches (``VersionTargets`` resolutions, ``AccessFacts``) send a miss to the
database once, however many callers missed it together: the first starts the read as
a task, the others await that task. A read nobody awaits any more still finishes (and
fills its cache), and its failure is not reported as unretrieved.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Hashable
from typing import Any, Generic, TypeVar

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")


class SingleFlight(Generic[K, T]):
    """The reads in flight, by key."""

    def __init__(self) -> None:
        self._reads: dict[K, asyncio.Future[T]] = {}
        self.generation = 0
        """Bumped by every ``drop``: a read that began before it (its cache's entry may
        predate the change) compares it and keeps nothing."""

    def start(self, key: K, read: Callable[[], Coroutine[Any, Any, T]]) -> asyncio.Future[T]:
        """The read of ``key`` in flight on this event loop, or ``read()`` started now."""
        loop = asyncio.get_running_loop()
        pending = self._reads.get(key)
        if pending is not None and pending.get_loop() is loop:
            return pending
        task = loop.create_task(self._run(key, read))
        task.add_done_callback(retrieve_failure)
        self._reads[key] = task
        return task

    def drop(self, matches: Callable[[K], bool]) -> None:
        """Later callers of a matching key start a read of their own instead of joining
        one begun before (what it reads may predate a change). Safe from any thread."""
        self.generation += 1
        for key in list(self._reads):
            if matches(key):
                self._reads.pop(key, None)

    async def _run(self, key: K, read: Callable[[], Coroutine[Any, Any, T]]) -> T:
        try:
            return await read()
        finally:
            if self._reads.get(key) is asyncio.current_task():
                self._reads.pop(key, None)  # (``drop`` may have removed it already)


def retrieve_failure(task: asyncio.Future[Any]) -> None:
    """A done callback for a task nobody may await: its failure is not reported as
    never retrieved (the callers that did await it saw it)."""
    if not task.cancelled():
        task.exception()
