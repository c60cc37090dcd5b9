"""Metering's background work in a serving process: deliver the outbox, consume the
usage stream (distributed shape), and sweep expired reservations."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

_log = logging.getLogger(__name__)


class BackgroundLoop:
    """Runs ``step`` every ``interval`` seconds in a daemon thread until stopped; a step
    that raises is logged and the loop goes on. ``kick`` runs the next step at once."""

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
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                self._step()
            except Exception:
                _log.exception("%s failed; retrying in %.1f s", self._name, self._interval)
            left = self._interval - (time.monotonic() - started)
            if left > 0:
                self._kick.wait(left)
            self._kick.clear()
