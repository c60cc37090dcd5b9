"""What each tenant declared about the response cache, as the hot path reads it.

Kept per tenant for ``ttl`` seconds; a change (``TenantCacheChanged``, from any process)
drops the tenant's entry at once, so the TTL only bounds staleness should an event be
lost. A principal of no tenant (the platform admin) declares nothing: the defaults.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import anyio.to_thread


@dataclass(frozen=True, slots=True)
class CacheFlags:
    no_cache: bool = False
    """Never answered from, nor stored in, the cache."""
    shared_cache: bool = False
    """Shares answers with the other tenants that opted in."""


DEFAULT = CacheFlags()


class TenantCacheFlags:
    """Tenants' flags, read through ``load`` (blocking: the database) and cached."""

    def __init__(
        self,
        load: Callable[[str], CacheFlags | None],
        *,
        ttl: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._load = load
        self._ttl = ttl
        self._clock = clock
        self._known: dict[str, tuple[float, CacheFlags]] = {}
        self._lock = threading.Lock()

    def cached(self, tenant: str) -> CacheFlags | None:
        """The tenant's flags if known and fresh (no I/O), else None."""
        found = self._known.get(tenant)
        if found is None or found[0] <= self._clock():
            return None
        return found[1]

    async def of(self, tenant: str | None) -> CacheFlags:
        """The flags of ``tenant`` (None: no tenant, the defaults)."""
        if tenant is None:
            return DEFAULT
        known = self.cached(tenant)
        if known is not None:
            return known
        loaded = await anyio.to_thread.run_sync(self._load, tenant)
        flags = DEFAULT if loaded is None else loaded
        with self._lock:
            if len(self._known) > 65536:  # many tenants: start over rather than grow
                self._known.clear()
            self._known[tenant] = (self._clock() + self._ttl, flags)
        return flags

    def forget(self, tenant: str) -> None:
        """``tenant`` changed its flags. Safe from any thread."""
        with self._lock:
            self._known.pop(tenant, None)

    def forget_all(self) -> None:
        with self._lock:
            self._known.clear()
