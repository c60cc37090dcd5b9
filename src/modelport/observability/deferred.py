"""Per-call observations kept in a plain list and applied to Prometheus later.

A ``Counter.inc`` or ``Histogram.observe`` costs about a microsecond and a half (a lock,
and in multiprocess mode a write to a shared file); a call that feeds several series
would pay several. ``Deferred`` instead appends the call's figures to a list under a
lock (a fraction of a microsecond) and applies them (``apply``) in one go:

- before every read of the registry it is registered on (a scrape, ``render``,
  ``get_sample_value``): a scrape sees every call recorded before it;
- ``FOLD_INTERVAL`` after the first observation still pending, by a one-shot timer on
  the recording event loop (at once for a recording off any loop), so that in
  multiprocess mode (a scrape reads the shared files, not this registry) they lag by at
  most that, idle or not; a timer whose loop stopped is replaced by the next recording;
- at interpreter exit.
"""

from __future__ import annotations

import asyncio
import atexit
import threading
import weakref
from collections.abc import Callable, Iterable
from time import monotonic
from typing import Any

from prometheus_client import CollectorRegistry

FOLD_INTERVAL = 0.5  # seconds


class Deferred:
    """Observations of one kind, applied by ``apply`` (given the pending list)."""

    def __init__(self, registry: CollectorRegistry, apply: Callable[[list[Any]], None]) -> None:
        self._apply = apply
        self._lock = threading.Lock()
        self._pending: list[Any] = []
        self._armed_at = 0.0
        """``monotonic()`` when the pending timer was set; 0.0: none is."""
        # Registered before the series ``apply`` feeds: a collect applies first.
        registry.register(_Folder(self))
        atexit.register(_fold_at_exit, weakref.ref(self))

    def record(self, item: Any) -> None:
        now = monotonic()
        with self._lock:
            self._pending.append(item)
            # None pending, or one long overdue: its loop stopped before it fired.
            arm = not self._armed_at or now - self._armed_at > 2 * FOLD_INTERVAL
            if arm:
                self._armed_at = now
        if arm:
            try:
                asyncio.get_running_loop().call_later(FOLD_INTERVAL, self.fold)
            except RuntimeError:  # off any event loop: no timer to set, apply now
                self.fold()

    def fold(self) -> None:
        """Apply what was recorded so far."""
        with self._lock:
            pending, self._pending = self._pending, []
            self._armed_at = 0.0
        if pending:
            self._apply(pending)


class _Folder:
    def __init__(self, deferred: Deferred) -> None:
        self._deferred = weakref.ref(deferred)

    def describe(self) -> Iterable[Any]:
        return ()

    def collect(self) -> Iterable[Any]:
        deferred = self._deferred()
        if deferred is not None:
            deferred.fold()
        return ()


def _fold_at_exit(ref: weakref.ref[Deferred]) -> None:
    deferred = ref()
    if deferred is not None:
        deferred.fold()
