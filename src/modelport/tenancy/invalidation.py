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
import threading
import uuid
from collections.abc import Iterable
from typing import Any, Protocol

import orjson

from modelport.tenancy.keycache import KeyCache

CHANNEL = "modelport:keys:invalidate"
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
    """Publishes evictions on ``CHANNEL``; a daemon thread applies everyone's evictions."""

    def __init__(self, cache: KeyCache, url: str, *, channel: str = CHANNEL) -> None:
        import redis

        self.cache = cache
        self.channel = channel
        self.client_name = f"modelport-keys-{uuid.uuid4().hex[:12]}"
        # The health check pings an idle subscription, so a silently dropped connection
        # is noticed (and the cache cleared) within seconds rather than never.
        self._client: Any = redis.Redis.from_url(
            url,
            socket_timeout=5,
            socket_connect_timeout=5,
            health_check_interval=5,
            client_name=self.client_name,
        )
        self._subscribed = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()

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
        return self._subscribed.is_set()

    def wait_subscribed(self, timeout: float) -> bool:
        self._ensure_started()
        return self._subscribed.wait(timeout)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._client.close()

    def _ensure_started(self) -> None:
        if self._thread is not None:
            return
        with self._start_lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="modelport-key-invalidation", daemon=True
                )
                self._thread.start()

    def _run(self) -> None:
        backoff = 0.1
        while not self._stop.is_set():
            pubsub = self._client.pubsub(ignore_subscribe_messages=False)
            try:
                pubsub.subscribe(self.channel)
                while not self._stop.is_set():
                    message = pubsub.get_message(timeout=0.5)
                    if message is not None:
                        self._handle(message)
                        backoff = 0.1
            except Exception:
                _log.warning("key invalidation subscription lost; retrying", exc_info=True)
            finally:
                # Whatever happened while not listening is unknown: forget everything.
                self._subscribed.clear()
                self.cache.clear()
                pubsub.close()
            self._stop.wait(backoff)
            backoff = min(backoff * 2, 5.0)

    def _handle(self, message: dict[str, Any]) -> None:
        if message["type"] == "subscribe":
            self.cache.clear()
            self._subscribed.set()
        elif message["type"] == "message":
            try:
                ids = orjson.loads(message["data"])
            except orjson.JSONDecodeError:
                self.cache.clear()
                return
            self.cache.evict(str(i) for i in ids)
