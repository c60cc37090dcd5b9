"""The change bus: publish an event, and every subscriber of its kind is called.

Call order: ``subscribe``/``on_reset`` while wiring (each returns a callable that
undoes it); ``publish`` after the change is committed; ``close`` at shutdown.

A subscriber runs on the publisher's thread (in process) or on the bus's own thread
(from another process): it must be quick, thread-safe and not block. One that raises
is logged and the others still run; publishing never raises.

A *reset* means events may have been lost (a Redis subscription dropped and came
back): every subscriber's cache must be dropped wholesale, since any of it may be stale.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from modelport.changes.types import Change

_log = logging.getLogger(__name__)

C = TypeVar("C", bound=Change)
Unsubscribe = Callable[[], None]


class ChangeBus(Protocol):
    def publish(self, change: Change) -> None:
        """Tell every subscriber here, and in every other process sharing the bus."""
        ...

    def subscribe(self, kind: type[C], handler: Callable[[C], None]) -> Unsubscribe:
        """Call ``handler`` with every event of ``kind``, wherever it was published."""
        ...

    def on_reset(self, handler: Callable[[], None]) -> Unsubscribe:
        """Call ``handler`` whenever events may have been lost (drop everything cached)."""
        ...

    def live(self) -> bool:
        """Whether every process's events reach this one now (else cache nothing that
        must never be used stale)."""
        ...

    def wait_live(self, timeout: float) -> bool:
        """``live``, waiting up to ``timeout`` seconds for it."""
        ...

    def close(self) -> None: ...


class Subscribers:
    """Who wants which events; delivers one event or a reset to them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # Keyed by event class; each handler takes events of its key's class.
        self._handlers: dict[type, tuple[Callable[[Any], None], ...]] = {}
        self._resets: tuple[Callable[[], None], ...] = ()

    def subscribe(self, kind: type[C], handler: Callable[[C], None]) -> Unsubscribe:
        def remove() -> None:
            with self._lock:
                now = self._handlers.get(kind, ())
                self._handlers[kind] = tuple(h for h in now if h is not handler)

        with self._lock:  # copy on write: delivery reads a tuple without the lock
            self._handlers[kind] = (*self._handlers.get(kind, ()), handler)
        return remove

    def on_reset(self, handler: Callable[[], None]) -> Unsubscribe:
        def remove() -> None:
            with self._lock:
                self._resets = tuple(h for h in self._resets if h is not handler)

        with self._lock:
            self._resets = (*self._resets, handler)
        return remove

    def deliver(self, change: Change) -> None:
        for handler in self._handlers.get(type(change), ()):
            try:
                handler(change)
            except Exception:  # one failing cache must not keep the event from the others
                _log.exception("a subscriber failed on %s", change)

    def reset(self) -> None:
        for handler in self._resets:
            try:
                handler()
            except Exception:
                _log.exception("a subscriber failed to reset")


class LocalChangeBus(Subscribers):
    """One process: an event reaches this process's subscribers, on the publisher's
    thread, before ``publish`` returns."""

    def publish(self, change: Change) -> None:
        self.deliver(change)

    def live(self) -> bool:
        return True

    def wait_live(self, timeout: float) -> bool:
        return True

    def close(self) -> None:
        pass
