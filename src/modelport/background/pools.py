"""The process's thread pools, in one owner: built on first ask, closed together.

``modelport.app`` builds one ``ThreadPools`` and hands it to the components that run
blocking work on pools of their own size (webhook attempts, processing calls); its
``Services.close`` closes them, after the components that submit to them. A pool stays
separate per name, so a hung call stalls only its own pool's callers. A component
built without one (in a test) makes a private ``ThreadPools`` and closes it itself.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor


class ThreadPools:
    """Named thread pools (threads called ``<name>_<n>``)."""

    def __init__(self) -> None:
        self._pools: dict[str, tuple[ThreadPoolExecutor, bool]] = {}
        self._lock = threading.Lock()
        self._closed = False

    def get(self, name: str, max_workers: int, *, drain: bool = True) -> ThreadPoolExecutor:
        """The pool ``name``, built now with ``max_workers`` threads if it is new (a pool
        asked for again keeps its first size). ``drain``: ``close`` waits for the work
        it runs (False: queued work is cancelled and running work left to end by
        itself, for calls that may hang). ``RuntimeError`` once closed."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the thread pools are closed")
            found = self._pools.get(name)
            if found is None:
                found = (ThreadPoolExecutor(max_workers, thread_name_prefix=name), drain)
                self._pools[name] = found
            return found[0]

    @property
    def names(self) -> list[str]:
        with self._lock:
            return sorted(self._pools)

    def close(self) -> None:
        """Shut every pool down: queued work is cancelled; running work is waited for
        where the pool drains. Idempotent."""
        with self._lock:
            self._closed = True
            pools, self._pools = list(self._pools.values()), {}
        for pool, drain in pools:
            pool.shutdown(wait=drain, cancel_futures=True)
