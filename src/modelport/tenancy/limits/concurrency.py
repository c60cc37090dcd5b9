"""Keeping live leases alive: one background loop renews them until they are released.

Leases held in a shared store expire so that a crashed process cannot hold
slots forever; a live process renews its own well before they do.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

from modelport.background.loops import BackgroundLoop
from modelport.tenancy.limits.types import Lease

log = logging.getLogger(__name__)


class LeaseKeeper:
    """Calls ``renew`` with every held lease each ``interval`` seconds.

    ``add`` after a lease is acquired, ``discard`` before it is released,
    ``close`` once at shutdown. The loop starts with the first lease.
    """

    def __init__(self, renew: Callable[[Sequence[Lease]], None], interval: float) -> None:
        self._renew = renew
        self._leases: dict[str, Lease] = {}
        self._lock = threading.Lock()
        self._closed = False
        self._loop = BackgroundLoop(
            "modelport-lease-keeper", self._renew_held, interval, first_after=interval
        )

    def add(self, lease: Lease) -> None:
        with self._lock:
            self._leases[lease.id] = lease
            if self._closed:
                return
        self._loop.start()

    def discard(self, lease: Lease) -> None:
        with self._lock:
            self._leases.pop(lease.id, None)

    def held(self) -> list[Lease]:
        with self._lock:
            return list(self._leases.values())

    def _renew_held(self) -> None:
        leases = self.held()
        if not leases:
            return
        try:
            self._renew(leases)
        except Exception:
            # The next round tries again; leases outlive several missed rounds.
            log.warning("renewing %d concurrency leases failed", len(leases), exc_info=True)

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self._loop.stop(timeout=5)
