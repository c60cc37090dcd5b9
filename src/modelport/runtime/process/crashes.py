"""Crash counts per version in a sliding window, and the quarantine they lead to.

A version whose workers crashed ``limit`` times within ``window`` seconds is
quarantined: its calls are refused (503 ``version_quarantined``) without starting
another worker, until the oldest of those crashes is ``window`` seconds old. Time is
the injected ``Clock``'s monotonic time, so a test passes the window by advancing it.
"""

from __future__ import annotations

import threading
from collections import deque

from modelport.clock import Clock
from modelport.errors import Unavailable


class CrashLedger:
    """Crashes by version (``owner/name:version``); safe to use from any thread."""

    def __init__(self, *, limit: int, window: float, clock: Clock) -> None:
        if limit < 1 or window <= 0:
            raise ValueError("the crash limit must be at least 1 and the window positive")
        self.limit = limit
        self.window = window
        self._clock = clock
        self._lock = threading.Lock()
        self._crashes: dict[str, deque[float]] = {}

    def record(self, version: str) -> bool:
        """Count a crash of ``version``'s worker; True when this one quarantines it."""
        now = self._clock.monotonic()
        with self._lock:
            times = self._crashes.setdefault(version, deque())
            times.append(now)
            self._prune(times, now)
            return len(times) >= self.limit

    def crashes(self, version: str) -> int:
        """Crashes of ``version`` within the window, as of now."""
        now = self._clock.monotonic()
        with self._lock:
            times = self._crashes.get(version)
            if times is None:
                return 0
            self._prune(times, now)
            return len(times)

    def quarantined_for(self, version: str) -> float:
        """Seconds ``version`` stays quarantined (0.0: it is not)."""
        now = self._clock.monotonic()
        with self._lock:
            times = self._crashes.get(version)
            if times is None:
                return 0.0
            self._prune(times, now)
            if len(times) < self.limit:
                return 0.0
            # Lifted once fewer than ``limit`` crashes remain in the window.
            return max(0.0, times[-self.limit] + self.window - now)

    def check(self, version: str) -> None:
        """Raise ``version_quarantined`` while ``version`` is quarantined."""
        remaining = self.quarantined_for(version)
        if remaining > 0:
            raise Unavailable(
                f"{version} is quarantined: its worker crashed {self.crashes(version)} times "
                f"within {self.window:g} s",
                code="version_quarantined",
                retry_after=remaining,
            )

    def _prune(self, times: deque[float], now: float) -> None:
        while times and times[0] <= now - self.window:
            times.popleft()
