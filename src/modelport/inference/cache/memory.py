"""The in-process tier: an LRU bounded by the bytes of its answers, each kept for a TTL."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable

from modelport.inference.cache.entry import CachedAnswer


class MemoryTier:
    """At most ``max_bytes`` of answers (the least recently used go first), each usable
    ``ttl_seconds`` after it was computed. Thread-safe: jobs call from other loops."""

    def __init__(
        self,
        *,
        max_bytes: int,
        ttl_seconds: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.max_bytes = max_bytes
        self.ttl_seconds = ttl_seconds
        self._clock = clock
        self._entries: OrderedDict[str, CachedAnswer] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    @property
    def size_bytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: str) -> CachedAnswer | None:
        """The answer under ``key``, None when absent or expired."""
        with self._lock:
            found = self._entries.get(key)
            if found is None:
                return None
            if self._clock() - found.stored_at > self.ttl_seconds:
                self._drop(key)
                return None
            self._entries.move_to_end(key)
            return found

    def put(self, key: str, entry: CachedAnswer) -> bool:
        """Keep ``entry`` (False: bigger than the whole tier, not kept)."""
        if entry.nbytes > self.max_bytes:
            return False
        with self._lock:
            if key in self._entries:
                self._drop(key)
            self._entries[key] = entry
            self._bytes += entry.nbytes
            while self._bytes > self.max_bytes:
                oldest = next(iter(self._entries))
                self._drop(oldest)
        return True

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0

    def _drop(self, key: str) -> None:
        entry = self._entries.pop(key)
        self._bytes -= entry.nbytes
