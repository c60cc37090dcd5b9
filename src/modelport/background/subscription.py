"""A Redis channel subscription that outlives lost connections.

One daemon thread subscribes to one channel and hands each message to a callback.
When the connection drops, it calls ``on_lost`` (whatever was published meanwhile
is unknown) and subscribes again with backoff; ``subscribed`` is set only while a
subscription is live. Pub/sub delivers at most once: messages published while no
subscription is live are never seen.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

_log = logging.getLogger(__name__)

_POLL_SECONDS = 0.5
"""How long one wait for a message lasts, so ``stop`` is noticed within this time."""
_MAX_BACKOFF = 5.0


def redis_client(url: str, client_name: str) -> Any:
    """A client for publishing and subscribing. Its health check pings an idle
    subscription, so a silently dropped connection is noticed within seconds, not
    never; ``client_name`` lets operators (and tests) find it in ``CLIENT LIST``."""
    import redis

    return redis.Redis.from_url(
        url,
        socket_timeout=5,
        socket_connect_timeout=5,
        health_check_interval=5,
        client_name=client_name,
    )


class Subscription:
    """Calls ``on_message(data)`` for every message on ``channel`` (see the module
    docstring); ``on_subscribed`` runs each time a subscription becomes live, before
    ``subscribed`` is set; ``on_lost`` each time it ends."""

    def __init__(
        self,
        client: Any,
        channel: str,
        on_message: Callable[[bytes], None],
        *,
        name: str,
        on_subscribed: Callable[[], None] = lambda: None,
        on_lost: Callable[[], None] = lambda: None,
    ) -> None:
        self.client = client
        self.channel = channel
        self.name = name
        self.subscribed = threading.Event()
        self._on_message = on_message
        self._on_subscribed = on_subscribed
        self._on_lost = on_lost
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        """Start the thread, unless it runs already (again after ``stop``)."""
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                return
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=timeout)

    def _run(self) -> None:
        backoff = 0.1
        while not self._stop.is_set():
            pubsub = self.client.pubsub(ignore_subscribe_messages=False)
            try:
                pubsub.subscribe(self.channel)
                while not self._stop.is_set():
                    message = pubsub.get_message(timeout=_POLL_SECONDS)
                    if message is not None:
                        self._handle(message)
                        backoff = 0.1
            except Exception:
                _log.warning("subscription to %s lost; retrying", self.channel, exc_info=True)
            finally:
                self.subscribed.clear()
                self._on_lost()
                pubsub.close()
            self._stop.wait(backoff)
            backoff = min(backoff * 2, _MAX_BACKOFF)

    def _handle(self, message: dict[str, Any]) -> None:
        if message["type"] == "subscribe":
            self._on_subscribed()
            self.subscribed.set()
        elif message["type"] == "message":
            try:
                self._on_message(message["data"])
            except Exception:  # one bad message must not end the subscription
                _log.exception("could not handle a message on %s", self.channel)
