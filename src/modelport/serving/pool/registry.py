"""Which workers are alive: each announces itself under an expiring lease in Redis.

A worker's heartbeat writes its record (``WorkerInfo`` as JSON) to
``…:workers:{id}`` with a time to live (the lease) and adds its id to the set
``…:workers``. Redis expires a record whose heartbeats stopped; a reader drops ids
whose record is gone from the set. So the live workers are exactly those whose lease
has not lapsed, by Redis's own clock, with nothing to sweep.
"""

from __future__ import annotations

import logging
import math
from typing import Any, Protocol

import orjson

from modelport.keyspace import Keyspace
from modelport.serving.pool.types import WorkerInfo

_log = logging.getLogger(__name__)


class WorkerRegistry(Protocol):
    def announce(self, info: WorkerInfo, lease_seconds: float) -> None:
        """Record ``info`` as alive for ``lease_seconds`` from now."""
        ...

    def withdraw(self, worker_id: str) -> None:
        """The worker leaves at once (a clean shutdown)."""
        ...

    def live(self) -> list[WorkerInfo]:
        """Every worker whose lease holds, by id."""
        ...


class RedisWorkerRegistry:
    """``WorkerRegistry`` on Redis (see the module)."""

    def __init__(self, client: Any, keys: Keyspace) -> None:
        self.client = client
        self.keys = keys
        self._index = keys.name("workers")

    def _record(self, worker_id: str) -> str:
        return self.keys.name("workers", worker_id)

    def announce(self, info: WorkerInfo, lease_seconds: float) -> None:
        lease_ms = max(1, math.ceil(lease_seconds * 1000))
        with self.client.pipeline(transaction=True) as pipe:
            pipe.set(self._record(info.id), orjson.dumps(info.to_doc()), px=lease_ms)
            pipe.sadd(self._index, info.id)
            pipe.execute()

    def withdraw(self, worker_id: str) -> None:
        with self.client.pipeline(transaction=True) as pipe:
            pipe.delete(self._record(worker_id))
            pipe.srem(self._index, worker_id)
            pipe.execute()

    def live(self) -> list[WorkerInfo]:
        ids = sorted(i.decode() if isinstance(i, bytes) else str(i) for i in
                     self.client.smembers(self._index))  # fmt: skip
        if not ids:
            return []
        records = self.client.mget([self._record(i) for i in ids])
        found: list[WorkerInfo] = []
        lapsed: list[str] = []
        for worker_id, raw in zip(ids, records, strict=True):
            if raw is None:
                lapsed.append(worker_id)
                continue
            try:
                found.append(WorkerInfo.from_doc(orjson.loads(raw)))
            except (ValueError, KeyError, TypeError):
                _log.warning("worker %s announced an unreadable record; ignored", worker_id)
        if lapsed:
            # Its lease lapsed: out of the index too. A heartbeat racing this re-adds it.
            self.client.srem(self._index, *lapsed)
        return found
