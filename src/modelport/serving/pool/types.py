"""Plain records of the worker pool: what a worker announces, and what is placed."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

READY = "ready"
LOADING = "loading"
FAILED = "failed"
PLACED = "placed"
"""A placement not yet picked up by its worker."""


@dataclass(frozen=True)
class WorkerInfo:
    """One worker, as its last heartbeat announced it."""

    id: str
    address: str
    """``host:port`` of its OIP gRPC server."""
    pool: str = "default"
    memory_bytes: int | None = None
    """Host memory its model host may take (None: no budget set)."""
    accelerators: frozenset[str] = frozenset({"cpu"})
    """Hardware it runs on (``cpu``, ``cuda``...)."""
    formats: frozenset[str] = frozenset()
    engines: frozenset[str] = frozenset()
    versions: Mapping[str, str] = field(default_factory=dict)
    """The versions it holds (``owner/name:version``) and their load state."""
    queued: Mapping[str, float] = field(default_factory=dict)
    """Requests waiting per version, as its host counts them."""
    waits: Mapping[str, float] = field(default_factory=dict)
    """Predicted queue wait per version in seconds: how long a request arriving now
    would wait before its batch (or sequence) starts, as its batchers and schedulers
    predict it; the autoscaling signal."""
    used_bytes: int = 0
    """Host memory its loaded versions take."""

    def ready(self, ref: str) -> bool:
        return self.versions.get(ref) == READY

    def to_doc(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "address": self.address,
            "pool": self.pool,
            "memory_bytes": self.memory_bytes,
            "accelerators": sorted(self.accelerators),
            "formats": sorted(self.formats),
            "engines": sorted(self.engines),
            "versions": dict(self.versions),
            "queued": dict(self.queued),
            "waits": dict(self.waits),
            "used_bytes": self.used_bytes,
        }

    @classmethod
    def from_doc(cls, doc: Mapping[str, Any]) -> WorkerInfo:
        memory = doc.get("memory_bytes")
        return cls(
            id=str(doc["id"]),
            address=str(doc["address"]),
            pool=str(doc.get("pool") or "default"),
            memory_bytes=None if memory is None else int(memory),
            accelerators=frozenset(doc.get("accelerators") or ("cpu",)),
            formats=frozenset(doc.get("formats") or ()),
            engines=frozenset(doc.get("engines") or ()),
            versions={str(k): str(v) for k, v in (doc.get("versions") or {}).items()},
            queued={str(k): float(v) for k, v in (doc.get("queued") or {}).items()},
            waits={str(k): float(v) for k, v in (doc.get("waits") or {}).items()},
            used_bytes=int(doc.get("used_bytes") or 0),
        )


@dataclass(frozen=True)
class PlacedReplica:
    """One replica of a version placed on a worker (a row of ``worker_placements``)."""

    ref: str
    """``owner/name:version``"""
    manifest_digest: str
    worker_id: str
    state: str = PLACED
    memory_bytes: int = 0
    """What the placement budgeted for it on its worker."""
    cause: str | None = None


@dataclass(frozen=True)
class Wanted:
    """A version the gateways want held by the pool: how, and how many copies."""

    ref: str
    manifest_digest: str
    format: str
    memory_bytes: int
    replicas: int
    pool: str = "default"
    hardware: frozenset[str] = frozenset({"cpu"})
    engine: str | None = None
