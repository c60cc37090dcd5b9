"""The change bus across processes: Redis pub/sub on the installation's channel ``changes``.

``publish`` delivers to this process's subscribers at once, then publishes the event;
a daemon thread (started by the first subscription) delivers the other processes'
events. Pub/sub delivers at most once, so whenever the subscription is lost and
whenever it (re)starts, every subscriber is *reset*: what was published meanwhile is
unknown, so every cache is dropped wholesale. Between a loss and the next
subscription, caches fill again and may go stale for at most their own TTL, which
still bounds staleness should Redis drop a message.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import Any

from modelport.background.subscription import Subscription, redis_client
from modelport.changes.bus import C, Subscribers, Unsubscribe
from modelport.changes.types import Change, Unreadable, decode, encode
from modelport.keyspace import Keyspace

_log = logging.getLogger(__name__)


class RedisChangeBus(Subscribers):
    def __init__(self, url: str, keys: Keyspace) -> None:
        super().__init__()
        self.origin = uuid.uuid4().hex
        self.channel = keys.name("changes")
        self.client_name = f"modelport-changes-{self.origin[:12]}"
        self._client: Any = redis_client(url, self.client_name)
        self._subscription = Subscription(
            self._client,
            self.channel,
            self._receive,
            name="modelport-changes",
            on_subscribed=self.reset,
            on_lost=self.reset,
        )

    def publish(self, change: Change) -> None:
        self.deliver(change)
        try:
            self._client.publish(self.channel, encode(change, self.origin))
        except Exception:  # committed; the others' caches expire within their TTL
            _log.exception("could not tell the other processes about %s", change)

    def subscribe(self, kind: type[C], handler: Callable[[C], None]) -> Unsubscribe:
        undo = super().subscribe(kind, handler)
        self._subscription.start()  # someone listens now: a no-op once running
        return undo

    def on_reset(self, handler: Callable[[], None]) -> Unsubscribe:
        undo = super().on_reset(handler)
        self._subscription.start()
        return undo

    def live(self) -> bool:
        return self._subscription.subscribed.is_set()

    def wait_live(self, timeout: float) -> bool:
        return self._subscription.subscribed.wait(timeout)

    def close(self) -> None:
        self._subscription.stop()
        self._client.close()

    def _receive(self, data: bytes) -> None:
        try:
            origin, change = decode(data)
        except Unreadable:
            _log.warning("an unreadable message on %s; dropping every cache", self.channel)
            self.reset()  # something changed, but what is unknown
            return
        if change is not None and origin != self.origin:  # its own: delivered at publish
            self.deliver(change)
