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
from collections.abc import Sequence
from dataclasses import dataclass

from modelport.background.group_thread import GroupThread, answer_loops, await_answer
from modelport.tenancy.limits.redis import GateAnswer, GateRequest, RedisGate
from modelport.tenancy.limits.types import RateItem, SlotItem

_Answer = GateAnswer | BaseException


@dataclass(slots=True)
class _Job:
    request: GateRequest
    future: asyncio.Future[GateAnswer]


class GroupAdmitter(GroupThread[_Job]):
    """Queues admissions and sends them to Redis in batches (see the module docstring)."""

    def __init__(self, gate: RedisGate, *, max_batch: int = 512, idle_seconds: float = 5.0) -> None:
        super().__init__("limits-admitter", max_batch=max_batch, idle_seconds=idle_seconds)
        self._gate = gate
        self.batches = 0
        """Pipelines sent so far (tests and benchmarks read it)."""
        self.released = 0
        """Leases given back because their caller went away."""

    async def admit(
        self, rate_items: Sequence[RateItem], cost: int, slot_items: Sequence[SlotItem]
    ) -> GateAnswer:
        """``RedisGate.admit`` through the group: the rate decision, and the slot
        decision when the rate passed (else None); raises ``Unavailable``. Cancelled
        while waiting, the slot taken for it (if any) is released."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[GateAnswer] = loop.create_future()
        self._put(_Job(GateRequest(rate_items, cost, slot_items), future))
        return await await_answer(future, self._give_back)

    def close(self) -> None:
        """Stop the thread once the queue is empty (calls after this fail)."""
        self._close()

    def _process(self, jobs: list[_Job]) -> None:
        answers: Sequence[_Answer]
        try:
            answers = self._gate.admit_many([job.request for job in jobs])
            self.batches += 1
        except Exception as exc:  # the whole pipeline failed: every call fails closed
            answers = [exc] * len(jobs)
        answer_loops(
            ((job.future, answer) for job, answer in zip(jobs, answers, strict=True)),
            self._give_back,  # a caller gone (cancelled, or its loop closed): slot freed
        )

    def _give_back(self, answer: GateAnswer) -> None:
        slot = answer[1]
        if slot is not None and slot.lease is not None:
            self._gate.release(slot.lease)  # queued, no I/O: safe on the event loop
            self.released += 1
