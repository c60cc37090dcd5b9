"""Telling every process that some keys changed, so each evicts them from its cache.

Call order: ``publish`` after the change is committed; the authenticator asks
``can_cache()`` before caching anything; ``close`` at shutdown.

- ``LocalInvalidation`` (embedded: one process) evicts from the one cache.
- ``RedisInvalidation`` (distributed) also publishes the key ids on a Redis channel
  that every gateway process subscribes to. A process only caches while its
  subscription is live; when the connection drops it clears its cache and stops
  caching until it has subscribed again, so it can never miss a revocation and keep
  serving a stale entry (the cache's TTL bounds staleness should Redis lose a message).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable
from typing import Protocol

import orjson

from modelport.background.subscription import Subscription, redis_client
from modelport.keyspace import Keyspace
from modelport.tenancy.keycache import KeyCache

_log = logging.getLogger(__name__)


class Invalidation(Protocol):
    def publish(self, key_ids: Iterable[str]) -> None:
        """Evict these keys here and in every other process."""
        ...

    def can_cache(self) -> bool:
        """Whether evictions would reach this process now (else do not cache)."""
        ...

    def close(self) -> None: ...


class LocalInvalidation:
    def __init__(self, cache: KeyCache) -> None:
        self.cache = cache

    def publish(self, key_ids: Iterable[str]) -> None:
        self.cache.evict(list(key_ids))

    def can_cache(self) -> bool:
        return True

    def close(self) -> None:
        pass


class RedisInvalidation:
    """Publishes evictions on the installation's channel ``keys:invalidate``; a daemon
    thread applies everyone's evictions."""

    def __init__(self, cache: KeyCache, url: str, keys: Keyspace) -> None:
        self.cache = cache
        self.channel = keys.name("keys", "invalidate")
        self.client_name = f"modelport-keys-{uuid.uuid4().hex[:12]}"
        self._client = redis_client(url, self.client_name)
        # Whatever happened while not listening is unknown: forget everything, both when
        # a subscription starts and when it is lost.
        self._subscription = Subscription(
            self._client,
            self.channel,
            self._evict,
            name="modelport-key-invalidation",
            on_subscribed=cache.clear,
            on_lost=cache.clear,
        )
        self._started = False

    def publish(self, key_ids: Iterable[str]) -> None:
        ids = list(key_ids)
        self.cache.evict(ids)
        if not ids:
            return
        try:
            self._client.publish(self.channel, orjson.dumps(ids))
        except Exception:  # the change is committed; other caches expire within their TTL
            _log.exception("could not publish the invalidation of keys %s", ids)

    def can_cache(self) -> bool:
        self._ensure_started()
        return self._subscription.subscribed.is_set()

    def wait_subscribed(self, timeout: float) -> bool:
        self._ensure_started()
        return self._subscription.subscribed.wait(timeout)

    def close(self) -> None:
        self._subscription.stop()
        self._client.close()

    def _ensure_started(self) -> None:
        if not self._started:  # on every authentication: a flag, not the lock
            self._started = True
            self._subscription.start()

    def _evict(self, data: bytes) -> None:
        try:
            ids = orjson.loads(data)
        except orjson.JSONDecodeError:
            ids = None
        if not isinstance(ids, list):  # not ours to read: forget everything to be safe
            self.cache.clear()
            return
        self.cache.evict(str(i) for i in ids)
