"""An in-process cache of key credentials, so most requests authenticate without a query.

Entries live at most ``ttl`` seconds; revocations, rotations and role changes evict
them at once (in this process directly, in others through
``modelport.tenancy.invalidation``). A generation counter closes the race between
reading a credential from the database and an eviction that arrives meanwhile: a
credential read before an eviction is not cached after it.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable

from modelport.tenancy.repository import KeyCredential


class KeyCache:
    def __init__(
        self,
        *,
        ttl: float,
        max_entries: int = 100_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ttl = ttl
        self.max_entries = max_entries
        self._clock = clock
        self._entries: OrderedDict[str, tuple[float, KeyCredential]] = OrderedDict()
        self._lock = threading.Lock()
        self._generation = 0

    @property
    def generation(self) -> int:
        """Read before fetching a credential; pass to ``put``."""
        return self._generation

    def get(self, key_id: str) -> KeyCredential | None:
        with self._lock:
            found = self._entries.get(key_id)
            if found is None:
                return None
            stored_at, credential = found
            if self._clock() - stored_at >= self.ttl:
                del self._entries[key_id]
                return None
            return credential

    def put(self, credential: KeyCredential, generation: int) -> bool:
        """Cache ``credential`` unless something was evicted since ``generation``."""
        with self._lock:
            if generation != self._generation:
                return False
            self._entries[credential.key_id] = (self._clock(), credential)
            self._entries.move_to_end(credential.key_id)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
            return True

    def evict(self, key_ids: Iterable[str]) -> None:
        with self._lock:
            self._generation += 1
            for key_id in key_ids:
                self._entries.pop(key_id, None)

    def clear(self) -> None:
        with self._lock:
            self._generation += 1
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)
