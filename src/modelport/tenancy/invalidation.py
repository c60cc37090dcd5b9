"""Telling every process that some keys changed, so each evicts them from its cache.

Call order: ``publish`` after the change is committed; the authenticator asks
``can_cache()`` before caching anything; ``close`` at shutdown.

Evictions travel as ``KeysRevoked`` events on the change bus: in process at once, and
with Redis to every process of the installation. A process only caches while the
bus's subscription is live; whenever events may have been lost (the subscription
starts, drops or comes back) it clears its cache, and while it is not subscribed it
caches nothing, so it can never miss a revocation and keep serving a stale entry
(the cache's TTL bounds staleness should Redis lose a message).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from modelport.changes import ChangeBus, KeysRevoked
from modelport.tenancy.keycache import KeyCache


class Invalidation(Protocol):
    def publish(self, key_ids: Iterable[str]) -> None:
        """Evict these keys here and in every other process."""
        ...

    def can_cache(self) -> bool:
        """Whether evictions would reach this process now (else do not cache)."""
        ...

    def close(self) -> None: ...


class KeyInvalidation:
    """The key cache's subscription to ``KeysRevoked`` (and to resets) on ``changes``."""

    def __init__(self, cache: KeyCache, changes: ChangeBus) -> None:
        self.cache = cache
        self.changes = changes
        self._undo = [
            changes.subscribe(KeysRevoked, self._evict),
            changes.on_reset(cache.clear),
        ]

    def publish(self, key_ids: Iterable[str]) -> None:
        ids = tuple(key_ids)
        if ids:  # delivered here before ``publish`` returns, then to the others
            self.changes.publish(KeysRevoked(ids))

    def can_cache(self) -> bool:
        return self.changes.live()

    def wait_subscribed(self, timeout: float) -> bool:
        return self.changes.wait_live(timeout)

    def close(self) -> None:
        for undo in self._undo:
            undo()

    def _evict(self, change: KeysRevoked) -> None:
        self.cache.evict(change.key_ids)
