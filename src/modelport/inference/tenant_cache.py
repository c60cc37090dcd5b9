"""A per-tenant value the hot path reads (a tenant's cache flags, its tier): loaded
through a blocking ``load`` (the database) off the event loop, kept ``ttl`` seconds,
dropped at once when the tenant's change event arrives (``forget``), so the TTL only
bounds staleness should an event be lost."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

import anyio.to_thread

T = TypeVar("T")

_MAX_TENANTS = 65536
"""Past this many tenants the cache starts over rather than grow."""


class TenantCache(Generic[T]):
    """Each tenant's value, read through ``load`` and cached; a tenant ``load`` does not
    know (None) gets ``default``."""

    def __init__(
        self,
        load: Callable[[str], T | None],
        *,
        default: T,
        ttl: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._load = load
        self._default = default
        self._ttl = ttl
        self._clock = clock
        self._known: dict[str, tuple[float, T]] = {}
        self._lock = threading.Lock()

    def cached(self, tenant: str) -> T | None:
        """The tenant's value if known and fresh (no I/O), else None."""
        found = self._known.get(tenant)
        if found is None or found[0] <= self._clock():
            return None
        return found[1]

    async def get(self, tenant: str) -> T:
        """The tenant's value, loaded (off the loop) when not cached."""
        known = self.cached(tenant)
        if known is not None:
            return known
        loaded = await anyio.to_thread.run_sync(self._load, tenant)
        value = self._default if loaded is None else loaded
        with self._lock:
            if len(self._known) > _MAX_TENANTS:
                self._known.clear()
            self._known[tenant] = (self._clock() + self._ttl, value)
        return value

    def forget(self, tenant: str) -> None:
        """``tenant``'s value changed. Safe from any thread."""
        with self._lock:
            self._known.pop(tenant, None)

    def forget_all(self) -> None:
        with self._lock:
            self._known.clear()
