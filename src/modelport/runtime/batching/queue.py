"""The pending-request queue and batch formation: pure logic, no clock, no event loop.

``RequestQueue.step(now, ...)`` looks at what is queued and answers with one
decision: a batch to dispatch now, or the time to look again. Policy:

- Requests whose deadline has passed are removed first and returned as expired;
  they are never executed.
- Three priority classes, each kept earliest-deadline-first. The batch's head is the
  most urgent ``interactive`` request if there is one, else the most urgent
  ``batch`` one, else the most urgent ``offline`` one: an interactive request never
  waits behind batch work, and offline work is served only when neither waits.
- The batch takes, in that order (interactive by deadline, then batch, then offline),
  every queued request of the head's batch group that still fits in
  ``max_batch_size`` rows. A request larger than the limit runs alone. Offline
  requests fill the rows left only when every waiting interactive and batch request
  is in the batch already.
- It is dispatched at once when it is full, when it reaches a preferred size (the
  largest reachable one), when batching is off, when its oldest request has
  waited ``max_delay``, or when waiting longer would make its most urgent request miss
  its deadline given the expected execution time. Otherwise the answer is to look
  again at the earliest of those moments (or on the next arrival).
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from modelport.runtime.types import PRIORITIES, Priority


class RequestState(IntEnum):
    """Ordered: every state from ``EXECUTING`` on has left the queue."""

    QUEUED = 0
    EXECUTING = 1
    DONE = 2
    EXPIRED = 3
    CANCELLED = 4


_sequence = itertools.count()


@dataclass(eq=False)
class PendingRequest:
    """A queued request; ``payload`` is whatever the batcher needs to answer it."""

    priority: Priority
    deadline: float
    enqueued_at: float
    rows: int
    group: Any
    payload: Any = None
    state: RequestState = RequestState.QUEUED
    seq: int = field(default_factory=lambda: next(_sequence))


@dataclass(frozen=True)
class Decision:
    expired: list[PendingRequest]
    """Removed because their deadline passed; answer them with ``deadline_exceeded``."""
    batch: list[PendingRequest] | None
    """Dispatch these now (already marked ``EXECUTING``), or None."""
    wake_at: float | None
    """When nothing is dispatched: look again at this time (None: on the next arrival)."""


class RequestQueue:
    """Queued requests of one version, by priority class and deadline."""

    def __init__(self) -> None:
        self._heaps: dict[Priority, list[tuple[float, int, PendingRequest]]] = {
            priority: [] for priority in PRIORITIES
        }
        self._count = dict.fromkeys(PRIORITIES, 0)
        self._total = 0  # asked for on every request: kept rather than summed

    def __len__(self) -> int:
        return self._total

    def depth(self, priority: Priority) -> int:
        return self._count[priority]

    def push(self, request: PendingRequest) -> None:
        heapq.heappush(self._heaps[request.priority], (request.deadline, request.seq, request))
        self._count[request.priority] += 1
        self._total += 1

    def discard(self, request: PendingRequest, state: RequestState) -> bool:
        """Take a still-queued request out (cancelled, or expired by a timer)."""
        if request.state is not RequestState.QUEUED:
            return False
        request.state = state
        self._count[request.priority] -= 1
        self._total -= 1
        return True  # its heap entry is skipped lazily

    def step(
        self,
        now: float,
        *,
        max_batch_size: int,
        max_delay: float,
        preferred_sizes: tuple[int, ...] = (),
        execute_estimate: float = 0.0,
    ) -> Decision:
        expired = self._expire(now)
        head = self._head()
        if head is None:
            return Decision(expired, None, None)
        batch, rows = self._collect(head, max_batch_size)
        dispatch_now = max_batch_size <= 1 or rows >= max_batch_size
        if not dispatch_now and preferred_sizes:
            reachable = [p for p in preferred_sizes if p <= rows]
            if reachable:
                batch = _trim(batch, max(reachable))
                dispatch_now = True
        wake_at = min(
            min(r.enqueued_at for r in batch) + max_delay,
            min(r.deadline for r in batch) - execute_estimate,
        )
        if dispatch_now or now >= wake_at:
            for request in batch:
                self.discard(request, RequestState.EXECUTING)
            return Decision(expired, batch, None)
        return Decision(expired, None, wake_at)

    def _expire(self, now: float) -> list[PendingRequest]:
        expired: list[PendingRequest] = []
        for heap in self._heaps.values():
            while heap and (heap[0][2].state is not RequestState.QUEUED or heap[0][0] <= now):
                _, _, request = heapq.heappop(heap)
                if self.discard(request, RequestState.EXPIRED):
                    expired.append(request)
        return expired

    def _head(self) -> PendingRequest | None:
        for priority in PRIORITIES:
            heap = self._heaps[priority]
            while heap and heap[0][2].state is not RequestState.QUEUED:
                heapq.heappop(heap)
            if heap:
                return heap[0][2]
        return None

    def _collect(self, head: PendingRequest, max_rows: int) -> tuple[list[PendingRequest], int]:
        batch, rows = [head], head.rows
        if max_rows <= 1 or rows >= max_rows:
            return batch, rows
        for priority in PRIORITIES:
            if priority is Priority.OFFLINE and head.priority is not Priority.OFFLINE:
                urgent = self._count[Priority.INTERACTIVE] + self._count[Priority.BATCH]
                if sum(r.priority is not Priority.OFFLINE for r in batch) < urgent:
                    return batch, rows  # a waiting request of a higher class goes first
            # Heap order is close to deadline order; sort the few candidates properly.
            candidates = sorted(
                entry
                for entry in self._heaps[priority]
                if entry[2] is not head
                and entry[2].state is RequestState.QUEUED
                and entry[2].group == head.group
            )
            for _, _, request in candidates:
                if rows + request.rows <= max_rows:
                    batch.append(request)
                    rows += request.rows
                    if rows == max_rows:
                        return batch, rows
        return batch, rows


def _trim(batch: list[PendingRequest], rows: int) -> list[PendingRequest]:
    kept: list[PendingRequest] = []
    total = 0
    for request in batch:
        if total + request.rows <= rows or not kept:
            kept.append(request)
            total += request.rows
    return kept
