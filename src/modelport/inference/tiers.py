"""Tenants' tiers as the hot path reads them (``inference.degrade.TierSource``).

Read only for a call that would give way by its tier under load, and kept per tenant
for ``ttl`` seconds; a change (``TenantTierChanged``, from any process) drops the
tenant's entry at once, so the TTL only bounds staleness should an event be lost. A
principal of no tenant (the platform operator) is never degraded by its tier.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import anyio.to_thread

from modelport.tenancy.types import Tier


class TenantTiers:
    """Tenants' tiers, read through ``load`` (blocking: the database) and cached; a
    tenant ``load`` does not know is ``standard``."""

    def __init__(
        self,
        load: Callable[[str], Tier | None],
        *,
        ttl: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._load = load
        self._ttl = ttl
        self._clock = clock
        self._known: dict[str, tuple[float, Tier]] = {}
        self._lock = threading.Lock()

    async def tier_of(self, tenant: str | None) -> Tier:
        if tenant is None:
            return Tier.PREMIUM
        found = self._known.get(tenant)
        if found is not None and found[0] > self._clock():
            return found[1]
        loaded = await anyio.to_thread.run_sync(self._load, tenant)
        tier = Tier.STANDARD if loaded is None else loaded
        with self._lock:
            if len(self._known) > 65536:  # many tenants: start over rather than grow
                self._known.clear()
            self._known[tenant] = (self._clock() + self._ttl, tier)
        return tier

    def forget(self, tenant: str) -> None:
        """``tenant`` changed its tier. Safe from any thread."""
        with self._lock:
            self._known.pop(tenant, None)

    def forget_all(self) -> None:
        with self._lock:
            self._known.clear()
