"""The dynamic batcher of one version: a thin asyncio layer around ``RequestQueue``.

``submit`` refuses at once what cannot be served in time (queue full, offline requests
past their share of the queue, or the predicted wait already past the deadline),
queues the rest and awaits the answer.
The batcher is driven by events on its event loop, with no task of its own:
whenever a batch finishes or a wait expires, ``_pump`` asks the queue for decisions
while an executor instance is free, and hands each batch to the ``Executor``, which
runs it on worker threads (or worker processes): no model code runs on the event loop.
A request's arrival pumps at the end of the loop's current turn rather than at once,
so the requests submitted in one turn (the callers a finished batch woke up, each
sending its next call) meet in the queue and leave as one batch, even with no queue
delay. When a batch fails, every request in it receives the error.

A request's deadline is armed as a timer: when it fires, a request still queued
is taken out (never executed) and its caller gets ``deadline_exceeded``; one
already executing is answered with the same error and its output dropped, or, when
the executor stops overdue batches (``Executor.kills_overdue``: worker processes),
with ``execution_timeout``: the executor kills the batch at its latest request's
deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from opentelemetry.trace import Tracer

from modelport.clock import Clock, SystemClock
from modelport.errors import DeadlineExceeded, Internal, ModelportError, Overloaded, Unavailable
from modelport.runtime.batching.queue import PendingRequest, RequestQueue, RequestState
from modelport.runtime.batching.requests import batch_group, batch_rows
from modelport.runtime.batching.spans import Timed, Traced, record_batch, traced_request
from modelport.runtime.executor import BatchOutcome, Executor
from modelport.runtime.observer import VersionObserver
from modelport.runtime.types import BatchingConfig, InferenceResult, InferenceTimings, Priority

_EWMA_WEIGHT = 0.2


@dataclass(eq=False)
class _Payload:
    inputs: Mapping[str, np.ndarray]
    future: asyncio.Future[InferenceResult]
    started_at: float = 0.0
    traced: Traced | None = None
    """The caller's sampled span (tracing on), for the request's spans."""


class Batcher:
    """Queues, batches and executes the requests of one version on one event loop."""

    def __init__(
        self,
        executor: Executor,
        config: BatchingConfig,
        observer: VersionObserver,
        *,
        name: str = "model",
        execute_estimate: float = 0.0,
        tracer: Tracer | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.executor = executor
        self.clock = clock or SystemClock()
        """What deadlines, queue waits and expiry timers are on (the executor's own
        deadline is real time: it bounds work in a thread or another process)."""
        self.tracer = tracer
        """Records the waits and batches of traced calls (``batching.spans``); None: off."""
        self.config = config
        self.observer = observer
        self.name = name
        self.loop = asyncio.get_running_loop()
        self._queue = RequestQueue()
        self._free = max(1, executor.instances)
        self._running = 0
        self._timer: asyncio.Handle | None = None
        self._pump_scheduled = False
        self._timer_at = 0.0
        self._idle: asyncio.Future[None] | None = None
        self._closing = False
        self._max_delay = config.max_queue_delay_us / 1e6
        self._ewma_execute = execute_estimate
        self._ewma_rows = 1.0
        self._executed = 0

    # ---- the caller's side
    async def submit(
        self,
        inputs: Mapping[str, np.ndarray],
        *,
        deadline: float,
        priority: Priority = Priority.INTERACTIVE,
        parameters: Mapping[str, Any] | None = None,
    ) -> InferenceResult:
        """Queue one request and await its outputs (``deadline`` on ``clock.monotonic()``)."""
        now = self.clock.monotonic()
        if self._closing:
            raise Unavailable(f"{self.name} is unloading", code="model_unloading", retry_after=1)
        if deadline <= now:
            self.observer.request_done("deadline_exceeded", 0.0)
            raise DeadlineExceeded(f"{self.name}: the deadline passed before queueing")
        self._admit(now, deadline, priority)
        future: asyncio.Future[InferenceResult] = self.loop.create_future()
        request = PendingRequest(
            priority=priority,
            deadline=deadline,
            enqueued_at=now,
            rows=batch_rows(inputs),
            group=batch_group(inputs, parameters) if self.config.batching else None,
            payload=_Payload(
                inputs,
                future,
                traced=traced_request(self._free > 0) if self.tracer is not None else None,
            ),
        )
        self._queue.push(request)
        self.observer.enqueued(priority)
        self.observer.queue_depth(len(self._queue))
        timer = self.clock.call_later(deadline - now, self._expire, request)
        self._pump_soon()
        outcome = "error"
        try:
            result = await future
            outcome = "success"
            return result
        except DeadlineExceeded:
            outcome = "deadline_exceeded"
            raise
        except asyncio.CancelledError:
            outcome = "cancelled"
            if self._queue.discard(request, RequestState.CANCELLED):
                self.observer.queue_depth(len(self._queue))
            raise
        finally:
            timer.cancel()
            self.observer.request_done(outcome, self.clock.monotonic() - now)

    def predicted_wait(self, priority: Priority = Priority.BATCH) -> float:
        """Seconds a new request of ``priority`` would wait now: the requests ahead of it
        at the recent execution time per row (what degradation under load reads)."""
        return self._ahead(priority) * self._ewma_execute / max(1.0, self._ewma_rows)

    def _ahead(self, priority: Priority) -> int:
        # A request waits only behind requests of its class and the more urgent ones.
        queue = self._queue
        if priority is Priority.INTERACTIVE:
            return queue.depth(Priority.INTERACTIVE)
        if priority is Priority.BATCH:
            return queue.depth(Priority.INTERACTIVE) + queue.depth(Priority.BATCH)
        return len(queue)

    def _admit(self, now: float, deadline: float, priority: Priority) -> None:
        queue = self._queue
        ahead = self._ahead(priority)
        predicted = ahead * self._ewma_execute / max(1.0, self._ewma_rows)
        reason = None
        if len(queue) >= self.config.max_queue_size:
            reason = f"{len(queue)} requests queued, the limit"
        elif (
            priority is Priority.OFFLINE
            and queue.depth(Priority.OFFLINE) >= self.config.max_offline_queued
        ):
            reason = f"{queue.depth(Priority.OFFLINE)} offline requests queued, their share"
        elif ahead and now + predicted > deadline:
            reason = f"the predicted wait of {predicted * 1000:.1f} ms exceeds the deadline"
        if reason is not None:
            self.observer.request_done("queue_full", 0.0)
            raise Overloaded(
                f"{self.name} is overloaded: {reason}",
                code="queue_full",
                retry_after=max(predicted, 0.001),
                queued=len(queue),
            )

    def _expire(self, request: PendingRequest) -> None:
        payload: _Payload = request.payload
        if self._queue.discard(request, RequestState.EXPIRED):
            self.observer.queue_depth(len(self._queue))
            self._pump()
        if payload.future.done():
            return
        if request.state is RequestState.EXECUTING and self.executor.kills_overdue:
            payload.future.set_exception(
                DeadlineExceeded(
                    f"{self.name}: the execution passed the deadline and is being stopped",
                    code="execution_timeout",
                )
            )
            return
        where = "executing" if request.state is RequestState.EXECUTING else "queued"
        payload.future.set_exception(
            DeadlineExceeded(f"{self.name}: the deadline passed while the request was {where}")
        )

    # ---- dispatching
    def _pump_soon(self) -> None:
        # Once per turn of the loop, after the callbacks already due (see the module).
        if not self._pump_scheduled:
            self._pump_scheduled = True
            self.loop.call_soon(self._pump_now)

    def _pump_now(self) -> None:
        self._pump_scheduled = False
        self._pump()

    def _pump(self) -> None:
        """Dispatch what the queue says to while an executor instance is free."""
        config = self.config
        while self._free and len(self._queue):
            now = self.clock.monotonic()
            decision = self._queue.step(
                now,
                max_batch_size=config.max_batch_size,
                max_delay=self._max_delay,
                preferred_sizes=config.preferred_batch_sizes,
                execute_estimate=self._ewma_execute,
            )
            for request in decision.expired:
                self._expire(request)
            if decision.batch:
                self._dispatch(decision.batch, now)
            elif decision.wake_at is not None:
                self._wake_at(decision.wake_at, now)
                break
        idle = self._idle
        if idle is not None and not idle.done() and not len(self._queue) and not self._running:
            idle.set_result(None)

    def _wake_at(self, when: float, now: float) -> None:
        delay = max(0.0, when - now)
        at = self.loop.time() + delay
        if self._timer is not None:
            if self._timer_at <= at:
                return  # an earlier wake-up is already set
            self._timer.cancel()
        # The time is kept here: uvloop answers a delay under a millisecond with a plain
        # ``Handle`` (a ``call_soon``), which has no ``when()``.
        self._timer = self.loop.call_later(delay, self._on_timer)
        self._timer_at = at

    def _on_timer(self) -> None:
        self._timer = None
        self._pump()

    def _dispatch(self, batch: list[PendingRequest], now: float) -> None:
        self._free -= 1
        self._running += 1
        self.observer.queue_depth(len(self._queue))
        for request in batch:
            request.payload.started_at = now
            self.observer.queued(now - request.enqueued_at)
        loop = self.loop

        def done(outcome: BatchOutcome | BaseException) -> None:  # on a worker thread
            # RuntimeError: the event loop is gone, and nobody is waiting any more.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._finish, batch, outcome)

        try:
            # The batch is worth finishing until its last request's deadline.
            deadline = batch[0].deadline if len(batch) == 1 else max(r.deadline for r in batch)
            real = time.monotonic() + (deadline - now)  # the executor's deadline: real time
            self.executor.submit([r.payload.inputs for r in batch], done, real)
        except Exception as exc:  # e.g. the executor was closed under us
            self._finish(batch, exc)

    def _finish(self, batch: list[PendingRequest], outcome: BatchOutcome | BaseException) -> None:
        self._free += 1
        self._running -= 1
        if self.tracer is not None:
            self._trace(batch, outcome)
        if isinstance(outcome, BatchOutcome):
            self.observer.batch_executed(outcome.rows, outcome.execute_seconds)
            if self._executed:
                self._ewma_execute += _EWMA_WEIGHT * (outcome.execute_seconds - self._ewma_execute)
                self._ewma_rows += _EWMA_WEIGHT * (outcome.rows - self._ewma_rows)
            else:  # the first real measurement replaces the warm-up estimate
                self._ewma_execute, self._ewma_rows = outcome.execute_seconds, outcome.rows
            self._executed += 1
        for index, request in enumerate(batch):
            if request.state is RequestState.EXECUTING:
                request.state = RequestState.DONE
            future = request.payload.future
            if future.done():
                continue  # its deadline fired or its caller went away
            if not isinstance(outcome, BatchOutcome):
                future.set_exception(_as_modelport_error(self.name, outcome))
                continue
            future.set_result(
                InferenceResult(
                    outputs=outcome.outputs[index],
                    timings=InferenceTimings(
                        queue_seconds=request.payload.started_at - request.enqueued_at,
                        execute_seconds=outcome.execute_seconds,
                        batch_size=outcome.rows,
                        batch_requests=len(batch),
                        gpu_seconds=outcome.gpu_seconds,
                    ),
                )
            )
        self._pump()

    def _trace(self, batch: list[PendingRequest], outcome: BatchOutcome | BaseException) -> None:
        assert self.tracer is not None
        timed = [
            Timed(r.payload.traced, r.enqueued_at, r.payload.started_at)
            for r in batch
            if r.payload.traced is not None
        ]
        if not timed:
            return
        record_batch(
            self.tracer,
            self.name,
            timed,
            started_at=batch[0].payload.started_at,
            rows=outcome.rows if isinstance(outcome, BatchOutcome) else sum(r.rows for r in batch),
            size=len(batch),
            now=self.clock.monotonic(),
            error=None if isinstance(outcome, BatchOutcome) else outcome,
        )

    # ---- shutdown
    async def drain(self) -> None:
        """Refuse new requests and wait until the queued and executing ones are answered."""
        self._closing = True
        if self._idle is None:
            self._idle = self.loop.create_future()
        self._pump()
        await self._idle

    def close(self) -> None:
        """Refuse new requests; the queued ones are still answered."""
        self._closing = True

    @property
    def queued(self) -> int:
        return len(self._queue)


def _as_modelport_error(name: str, error: BaseException) -> ModelportError:
    if isinstance(error, ModelportError):
        return error
    return Internal(f"{name}: model execution failed: {error}", code="execution_failed")
