"""A step repeated in a daemon thread: metering's background work in a serving process
(deliver the outbox, consume the usage stream, sweep expired reservations, flush the
usage journal) runs on it."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

_log = logging.getLogger(__name__)


_MIN_BACKOFF = 0.05
_MAX_BACKOFF = 5.0
"""Longest wait after failed steps (a step that succeeds resets it)."""


class BackgroundLoop:
    """Runs ``step`` every ``interval`` seconds in a daemon thread until stopped; a step
    that raises is logged and the loop goes on, after a wait that doubles while steps
    keep failing (0.05 s to 5 s, or the interval if longer). ``kick`` runs the next
    step at once."""

    def __init__(self, name: str, step: Callable[[], object], interval: float) -> None:
        self._name = name
        self._step = step
        self._interval = interval
        self._stop = threading.Event()
        self._kick = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
        self._thread.start()

    def kick(self) -> None:
        self._kick.set()

    def stop(self, timeout: float = 10.0) -> None:
        thread, self._thread = self._thread, None
        if thread is None:
            return
        self._stop.set()
        self._kick.set()
        thread.join(timeout)

    def _run(self) -> None:
        backoff = 0.0
        while not self._stop.is_set():
            started = time.monotonic()
            wait = self._interval
            try:
                self._step()
                backoff = 0.0
            except Exception:
                # A step that fails again at once must not spin (a loop with no interval
                # would log thousands of times a second): back off, up to _MAX_BACKOFF.
                backoff = min(_MAX_BACKOFF, max(backoff * 2, _MIN_BACKOFF))
                wait = max(wait, backoff)
                _log.exception("%s failed; retrying in %.1f s", self._name, wait)
            left = wait - (time.monotonic() - started)
            if left > 0:
                self._kick.wait(left)
            self._kick.clear()
