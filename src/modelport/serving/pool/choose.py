"""Which workers get a version's replicas: pure code over the live workers and what
is placed on them, so it is tested without Redis or a database.

A worker can take a replica when it is in the version's pool, runs its format (or its
generative engine), has one of the hardware kinds the version runs on, does not hold a replica of
that version already (losing one worker must never take every replica of a version),
and has the free memory: its capacity less what its placements budgeted. Among those,
the most free memory first, then the fewest placements (spreading load), then by id
(a stable answer).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from modelport.serving.pool.types import PlacedReplica, Wanted, WorkerInfo


@dataclass(frozen=True)
class Choice:
    workers: tuple[str, ...]
    """The workers to place new replicas on, best first."""
    refused: Mapping[str, str]
    """Why each other live worker could not take one."""

    @property
    def reason(self) -> str:
        """Why no more could be placed, in words."""
        if not self.refused:
            return "no worker is live"
        return "; ".join(f"{w}: {why}" for w, why in sorted(self.refused.items()))


def free_bytes(worker: WorkerInfo, placed: Sequence[PlacedReplica]) -> float:
    """What ``worker`` has left to budget (infinite when it sets no budget)."""
    if worker.memory_bytes is None:
        return math.inf
    return worker.memory_bytes - sum(p.memory_bytes for p in placed)


def unfit(wanted: Wanted, worker: WorkerInfo, placed: Sequence[PlacedReplica]) -> str | None:
    """Why ``worker`` cannot take a replica of ``wanted`` (None: it can)."""
    if worker.pool != wanted.pool:
        return f"in pool {worker.pool!r}, not {wanted.pool!r}"
    if wanted.engine is not None:
        if wanted.engine not in worker.engines:
            return f"does not run engine {wanted.engine!r}"
    elif wanted.format not in worker.formats:
        return f"does not run format {wanted.format!r}"
    if not wanted.hardware & worker.accelerators:
        return f"has none of {', '.join(sorted(wanted.hardware))}"
    if any(p.ref == wanted.ref for p in placed):
        return "holds a replica already"
    free = free_bytes(worker, placed)
    if free < wanted.memory_bytes:
        return f"has {int(free)} bytes free of the {wanted.memory_bytes} needed"
    return None


def choose(
    wanted: Wanted,
    workers: Collection[WorkerInfo],
    placed: Mapping[str, Sequence[PlacedReplica]],
) -> Choice:
    """The workers to add replicas of ``wanted`` on, so that the live workers hold
    ``wanted.replicas`` of it (fewer when fewer can); ``placed``: each worker's
    placements by worker id."""
    holding = sum(1 for w in workers if any(p.ref == wanted.ref for p in placed.get(w.id, ())))
    missing = max(0, wanted.replicas - holding)
    fit: list[WorkerInfo] = []
    refused: dict[str, str] = {}
    for worker in workers:
        why = unfit(wanted, worker, placed.get(worker.id, ()))
        if why is None:
            fit.append(worker)
        elif why != "holds a replica already":
            refused[worker.id] = why
    fit.sort(key=lambda w: (-free_bytes(w, placed.get(w.id, ())), len(placed.get(w.id, ())), w.id))
    return Choice(tuple(w.id for w in fit[:missing]), refused)
