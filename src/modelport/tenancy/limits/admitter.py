"""Group admission: one Redis pipeline for every limited call that asked meanwhile.

Admitting a limited call through Redis from an event loop used to cost a thread
hop per call as well as its round trip. Instead, each call queues its request and
awaits its own future; one admitter thread takes everything queued, sends all the
``RedisGate`` scripts in one pipeline (``RedisGate.admit_many``: decisions as if
one by one, in queue order) and resolves the futures with one wake-up per event
loop per batch. While a batch is on the wire the next gathers, so under load a
round trip carries many calls, and at concurrency 1 a call waits only for its own.

A Redis error fails the calls of its batch with ``Unavailable`` (503
``limiter_unavailable``): limits fail closed. A caller cancelled after its slot
was taken leaves no slot behind: the lease is released. The thread starts on the
first request and stops after ``idle_seconds`` without work.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from modelport.tenancy.limits.redis import GateAnswer, GateRequest, RedisGate
from modelport.tenancy.limits.types import RateItem, SlotItem

_log = logging.getLogger(__name__)

_Answer = GateAnswer | BaseException


@dataclass(slots=True)
class _Job:
    request: GateRequest
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[GateAnswer]


class GroupAdmitter:
    """Queues admissions and sends them to Redis in batches (see the module docstring)."""

    def __init__(self, gate: RedisGate, *, max_batch: int = 512, idle_seconds: float = 5.0) -> None:
        self._gate = gate
        self._max_batch = max_batch
        self._idle = idle_seconds
        self._queue: deque[_Job] = deque()
        self._ready = threading.Condition(threading.Lock())
        self._running = False
        self._closed = False
        self.batches = 0
        """Pipelines sent so far (tests and benchmarks read it)."""
        self.released = 0
        """Leases given back because their caller went away."""

    @property
    def running(self) -> bool:
        """Whether the admitter thread is alive (it stops when idle)."""
        return self._running

    async def admit(
        self, rate_items: Sequence[RateItem], cost: int, slot_items: Sequence[SlotItem]
    ) -> GateAnswer:
        """``RedisGate.admit`` through the group: the rate decision, and the slot
        decision when the rate passed (else None); raises ``Unavailable``. Cancelled
        while waiting, the slot taken for it (if any) is released."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[GateAnswer] = loop.create_future()
        self._put(_Job(GateRequest(rate_items, cost, slot_items), loop, future))
        try:
            return await future
        except asyncio.CancelledError:
            # Answered, but cancelled before this task resumed: nobody holds the slot.
            # (Cancelled before the answer, ``_resolve`` finds the future done.)
            if future.done() and not future.cancelled() and future.exception() is None:
                self._give_back(future.result())
            raise

    def close(self) -> None:
        """Stop the thread once the queue is empty (calls after this fail)."""
        with self._ready:
            self._closed = True
            self._ready.notify()

    def _put(self, job: _Job) -> None:
        with self._ready:
            if self._closed:
                raise RuntimeError("the group admitter is closed")
            self._queue.append(job)
            if self._running:
                self._ready.notify()
            else:
                self._running = True
                threading.Thread(target=self._run, name="limits-admitter", daemon=True).start()

    def _run(self) -> None:
        while True:
            with self._ready:
                if not self._queue and not self._closed:
                    self._ready.wait(self._idle)
                if not self._queue:
                    self._running = False
                    return
                count = min(len(self._queue), self._max_batch)
                jobs = [self._queue.popleft() for _ in range(count)]
            self._admit(jobs)

    def _admit(self, jobs: list[_Job]) -> None:
        answers: Sequence[_Answer]
        try:
            answers = self._gate.admit_many([job.request for job in jobs])
            self.batches += 1
        except Exception as exc:  # the whole pipeline failed: every call fails closed
            answers = [exc] * len(jobs)
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[_Job, _Answer]]] = {}
        for job, answer in zip(jobs, answers, strict=True):
            by_loop.setdefault(job.loop, []).append((job, answer))
        for loop, done in by_loop.items():
            try:
                loop.call_soon_threadsafe(_resolve, self, done)
            except RuntimeError:  # a closed loop: nobody left to hold the slots for
                for _, answer in done:
                    if not isinstance(answer, BaseException):
                        self._give_back(answer)

    def _give_back(self, answer: GateAnswer) -> None:
        slot = answer[1]
        if slot is not None and slot.lease is not None:
            self._gate.release(slot.lease)  # queued, no I/O: safe on the event loop
            self.released += 1


def _resolve(admitter: GroupAdmitter, done: list[tuple[_Job, _Answer]]) -> None:
    for job, answer in done:
        if job.future.done():  # its caller was cancelled: the slot must not stay taken
            if not isinstance(answer, BaseException):
                admitter._give_back(answer)
            continue
        if isinstance(answer, BaseException):
            job.future.set_exception(answer)
        else:
            job.future.set_result(answer)
