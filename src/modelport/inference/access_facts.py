"""What authorizing a call across tenants needs to know, cached in this process.

A consumer calling another tenant's model is the marketplace's main path. Deciding it
takes the model's visibility and, for a private model, the grants the caller's tenant
holds; reading them from the database on every call cost two thread hand-offs and
their queries per inference. Here:

- **visibility** is fixed when a model is created (nothing changes it, and models are
  not deleted), so it is kept for the life of the process (at most ``max_entries``
  models; a model that does not exist is not remembered);
- **grants** are kept ``ttl`` seconds and never used older: past that, the call waits
  for a fresh read. A grant given or withdrawn anywhere is forgotten as soon as its
  change event arrives (``forget_grants``, subscribed in ``modelport.app``); should
  an event be lost, within ``ttl``.

Concurrent callers missing the same fact share one read. The version's lifecycle
state, the third fact, comes with the resolved version (``VersionTargets.target``).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from modelport.background.single_flight import SingleFlight
from modelport.registry.service import RegistryService
from modelport.tenancy.service import TenancyService
from modelport.tenancy.types import GrantSet

T = TypeVar("T")


class AccessFacts:
    """Model visibilities and tenants' grants, for the hot authorization path."""

    def __init__(
        self,
        registry: RegistryService,
        tenancy: TenancyService,
        *,
        ttl: float = 1.0,
        max_entries: int = 4096,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.registry = registry
        self.tenancy = tenancy
        self.ttl = ttl
        self.max_entries = max_entries
        self._clock = clock
        self._visibility: dict[tuple[str, str], str] = {}
        self._grants: dict[str, tuple[float, GrantSet]] = {}
        self._reads: SingleFlight[tuple[str, ...], Any] = SingleFlight()
        self._lock = threading.Lock()  # a forget and a read's store, from any threads

    async def visibility(self, owner: str, name: str) -> str:
        """``public`` or ``private`` (``NotFound`` for a model that does not exist)."""
        found = self._visibility.get((owner, name))
        if found is not None:
            return found
        visibility: str = await self._read(("model", owner, name), self._read_visibility)
        return visibility

    async def grants(self, tenant: str) -> GrantSet:
        """What other tenants shared with ``tenant``, read at most ``ttl`` seconds ago."""
        cached = self._grants.get(tenant)
        if cached is not None and self._clock() < cached[0]:
            return cached[1]
        grants: GrantSet = await self._read(("grants", tenant), self._read_grants)
        return grants

    def forget_grants(self, tenant: str) -> None:
        """``tenant`` was given or lost a grant. Safe from any thread."""
        with self._lock:
            # Later calls start a read of their own, not join one begun before; one
            # ending from here on keeps nothing.
            self._reads.drop(lambda fact: fact == ("grants", tenant))
            self._grants.pop(tenant, None)

    def forget_all_grants(self) -> None:
        """Grants may have changed unseen (change events were lost). Safe from any thread."""
        with self._lock:
            self._reads.drop(lambda fact: fact[0] == "grants")
            self._grants.clear()

    # ---- reads, one at a time per fact
    async def _read(self, fact: tuple[str, ...], read: Callable[..., T]) -> T:
        pending = self._reads.start(fact, lambda: asyncio.to_thread(read, *fact[1:]))
        result: T = await asyncio.shield(pending)
        return result

    def _read_visibility(self, owner: str, name: str) -> str:
        visibility = self.registry.get_model(owner, name).visibility.value
        if len(self._visibility) >= self.max_entries:
            self._visibility.clear()  # many distinct models: start over rather than grow
        self._visibility[owner, name] = visibility
        return visibility

    def _read_grants(self, tenant: str) -> GrantSet:
        generation = self._reads.generation  # a forget meanwhile: keep nothing
        expires = self._clock() + self.ttl  # from before the read: never kept longer
        grants = self.tenancy.grants_to(tenant)
        with self._lock:
            if generation == self._reads.generation:
                if len(self._grants) >= self.max_entries:
                    self._grants.clear()
                self._grants[tenant] = (expires, grants)
        return grants
