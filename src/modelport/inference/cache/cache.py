"""The response cache's rule: which answers a call may reuse, and which it may leave.

A call of a version declared deterministic (``runtime.deterministic``), by a tenant
that has not declared no-cache, looks its question up (``key``) first in this
process's memory tier, then in the Redis tier when there is one (an answer found there
is kept in memory too). Answers live in a scope:

- a tenant's own scope (its slug; the principal's id for one of no tenant): only its
  own calls read or write it;
- the shared scope, for tenants that declared ``shared_cache``: their calls read and
  write it, and an answer there is reused by another tenant only while its producer
  still shares and has not declared no-cache (checked at each hit).

A no-cache tenant neither reads nor writes anything (its lookup is None). The cache
never fails a call: a Redis that does not answer is a miss.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import anyio.to_thread
import numpy as np

from modelport.inference.cache.entry import CachedAnswer, answer
from modelport.inference.cache.flags import TenantCacheFlags
from modelport.inference.cache.key import question_digest
from modelport.inference.cache.memory import MemoryTier
from modelport.inference.cache.redis import RedisTier

SHARED_SCOPE = "~shared"
"""The scope of opted-in tenants; '~' is in no tenant slug nor principal id."""


class CacheCounter(Protocol):
    """Counts lookups by result: ``hit``, ``miss``, ``bypass`` (a no-cache tenant)."""

    def count(self, result: str) -> None: ...


@dataclass(slots=True)
class Lookup:
    """One call's lookup: its key, its tenant, and the answer found (None: a miss)."""

    key: str
    tenant: str
    hit: CachedAnswer | None
    age_seconds: float = 0.0


class ResponseCache:
    """Looks answers up and stores them under the rule of the module docstring."""

    def __init__(
        self,
        memory: MemoryTier,
        flags: TenantCacheFlags,
        *,
        redis: RedisTier | None = None,
        counter: CacheCounter | None = None,
        max_entry_bytes: int = 1 << 20,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.memory = memory
        self.flags = flags
        self.redis = redis
        self.counter = counter
        self.max_entry_bytes = max_entry_bytes
        self._clock = clock

    async def lookup(
        self,
        tenant: str | None,
        principal: str,
        version_digest: str,
        inputs: Mapping[str, np.ndarray],
        parameters: Mapping[str, Any],
        outputs: tuple[str, ...] | None,
    ) -> Lookup | None:
        """The lookup of a call by ``principal`` of ``tenant`` (None: of no tenant); None
        when the tenant declared no-cache (nothing is read, nothing will be stored)."""
        flags = await self.flags.of(tenant)
        if flags.no_cache:
            self._count("bypass")
            return None
        owner = tenant or principal
        scope = SHARED_SCOPE if flags.shared_cache else owner
        key = f"{scope}:{question_digest(version_digest, inputs, parameters, outputs)}"
        entry = self.memory.get(key)
        if entry is None and self.redis is not None:
            entry = await anyio.to_thread.run_sync(self.redis.get, key)
            if entry is not None:
                self.memory.put(key, entry)
        if entry is not None and entry.tenant != owner and not await self._shares(entry.tenant):
            entry = None  # its producer stopped sharing, or declared no-cache since
        self._count("miss" if entry is None else "hit")
        if entry is None:
            return Lookup(key, owner, None)
        return Lookup(key, owner, entry, max(0.0, self._clock() - entry.stored_at))

    async def store(self, lookup: Lookup, outputs: Mapping[str, np.ndarray]) -> None:
        """Keep the answer a missed lookup's call computed (not above ``max_entry_bytes``)."""
        entry = answer(outputs, lookup.tenant, self._clock())
        if entry.nbytes > self.max_entry_bytes:
            return
        self.memory.put(lookup.key, entry)
        if self.redis is not None:
            await anyio.to_thread.run_sync(self.redis.put, lookup.key, entry)

    def forget_tenant(self, tenant: str) -> None:
        """``tenant`` changed its flags: read them afresh. Safe from any thread."""
        self.flags.forget(tenant)

    def close(self) -> None:
        if self.redis is not None:
            self.redis.close()

    async def _shares(self, producer: str) -> bool:
        flags = await self.flags.of(producer)
        return flags.shared_cache and not flags.no_cache

    def _count(self, result: str) -> None:
        if self.counter is not None:
            self.counter.count(result)
