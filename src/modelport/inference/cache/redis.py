"""The shared tier: answers in Redis, under the installation's keyspace, with a TTL.

Every process of the installation reads what any of them stored
(``modelport:{installation}:respcache:{scope}:{digest}``). Redis expires an answer
``ttl_seconds`` after it was stored. The tier is best effort: a Redis that does not
answer, or an unreadable value, is a miss (logged), never a failed call.
"""

from __future__ import annotations

import logging
from typing import Any

from modelport.inference.cache.entry import CachedAnswer, Unreadable, decode, encode
from modelport.keyspace import Keyspace

_log = logging.getLogger(__name__)


class RedisTier:
    """Blocking: call it from a worker thread. ``client`` is a ``redis.Redis``."""

    def __init__(self, client: Any, keys: Keyspace, *, ttl_seconds: float) -> None:
        self.client = client
        self.keys = keys
        self.ttl_ms = max(1, int(ttl_seconds * 1000))

    def name(self, key: str) -> str:
        return self.keys.name("respcache", key)

    def get(self, key: str) -> CachedAnswer | None:
        try:
            data = self.client.get(self.name(key))
        except Exception:  # any client or connection error: a miss
            _log.warning("response cache: Redis read failed", exc_info=True)
            return None
        if data is None:
            return None
        try:
            return decode(bytes(data))
        except Unreadable:
            _log.warning("response cache: unreadable entry %s", key)
            return None

    def put(self, key: str, entry: CachedAnswer) -> None:
        try:
            self.client.set(self.name(key), encode(entry), px=self.ttl_ms)
        except Exception:  # any client or connection error: not shared, still answered
            _log.warning("response cache: Redis write failed", exc_info=True)

    def close(self) -> None:
        self.client.close()
