"""Tenants' tiers as the hot path reads them (``inference.degrade.TierSource``).

Read only for a call that would give way by its tier under load, and kept per tenant
for ``ttl`` seconds; a change (``TenantTierChanged``, from any process) drops the
tenant's entry at once, so the TTL only bounds staleness should an event be lost. A
principal of no tenant (the platform operator) is never degraded by its tier.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from modelport.inference.tenant_cache import TenantCache
from modelport.tenancy.types import Tier


class TenantTiers(TenantCache[Tier]):
    """Tenants' tiers, read through ``load`` (blocking: the database) and cached; a
    tenant ``load`` does not know is ``standard``."""

    def __init__(
        self,
        load: Callable[[str], Tier | None],
        *,
        ttl: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(load, default=Tier.STANDARD, ttl=ttl, clock=clock)

    async def tier_of(self, tenant: str | None) -> Tier:
        """The tier of ``tenant`` (None: the platform operator, never degraded by it)."""
        return Tier.PREMIUM if tenant is None else await self.get(tenant)
