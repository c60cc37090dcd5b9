"""What each tenant declared about the response cache, as the hot path reads it.

Kept per tenant for ``ttl`` seconds; a change (``TenantCacheChanged``, from any process)
drops the tenant's entry at once, so the TTL only bounds staleness should an event be
lost. A principal of no tenant (the platform admin) declares nothing: the defaults.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from modelport.inference.tenant_cache import TenantCache


@dataclass(frozen=True, slots=True)
class CacheFlags:
    no_cache: bool = False
    """Never answered from, nor stored in, the cache."""
    shared_cache: bool = False
    """Shares answers with the other tenants that opted in."""


DEFAULT = CacheFlags()


class TenantCacheFlags(TenantCache[CacheFlags]):
    """Tenants' flags, read through ``load`` (blocking: the database) and cached."""

    def __init__(
        self,
        load: Callable[[str], CacheFlags | None],
        *,
        ttl: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(load, default=DEFAULT, ttl=ttl, clock=clock)

    async def of(self, tenant: str | None) -> CacheFlags:
        """The flags of ``tenant`` (None: no tenant, the defaults)."""
        return DEFAULT if tenant is None else await self.get(tenant)
