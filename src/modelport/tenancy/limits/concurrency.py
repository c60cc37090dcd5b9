"""Keeping live leases alive: one daemon thread renews them until they are released.

Leases held in a shared store expire so that a crashed process cannot hold
slots forever; a live process renews its own well before they do.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

from modelport.tenancy.limits.types import Lease

log = logging.getLogger(__name__)


class LeaseKeeper:
    """Calls ``renew`` with every held lease each ``interval`` seconds.

    ``add`` after a lease is acquired, ``discard`` before it is released,
    ``close`` once at shutdown. The thread starts with the first lease.
    """

    def __init__(self, renew: Callable[[Sequence[Lease]], None], interval: float) -> None:
        self._renew = renew
        self._interval = interval
        self._leases: dict[str, Lease] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, lease: Lease) -> None:
        with self._lock:
            self._leases[lease.id] = lease
            if self._thread is None and not self._stop.is_set():
                self._thread = threading.Thread(
                    target=self._run, name="modelport-lease-keeper", daemon=True
                )
                self._thread.start()

    def discard(self, lease: Lease) -> None:
        with self._lock:
            self._leases.pop(lease.id, None)

    def held(self) -> list[Lease]:
        with self._lock:
            return list(self._leases.values())

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            leases = self.held()
            if not leases:
                continue
            try:
                self._renew(leases)
            except Exception:
                # The next round tries again; leases outlive several missed rounds.
                log.warning("renewing %d concurrency leases failed", len(leases), exc_info=True)

    def close(self) -> None:
        self._stop.set()
        thread = self._thread
        if thread is not None:
            thread.join(timeout=5)
