"""The batcher loop with a controllable model: merging, deadlines, overload, priority."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np
import pytest
import uvloop

from modelport.errors import DeadlineExceeded, Internal, Overloaded, Unavailable
from modelport.runtime.batching.batcher import Batcher
from modelport.runtime.executor import ThreadExecutor
from modelport.runtime.types import BatchingConfig, InferenceResult, Priority
from tests.runtime.conftest import CountingModel


class RecordingObserver:
    def __init__(self) -> None:
        self.outcomes: list[str] = []
        self.batches: list[int] = []
        self.depths: list[int] = []
        self.queue_waits: list[float] = []
        self.classes: list[str] = []

    def enqueued(self, priority: str) -> None:
        self.classes.append(priority)

    def request_done(self, outcome: str, seconds: float) -> None:
        self.outcomes.append(outcome)

    def queued(self, seconds: float) -> None:
        self.queue_waits.append(seconds)

    def batch_executed(self, size: int, seconds: float) -> None:
        self.batches.append(size)

    def queue_depth(self, depth: int) -> None:
        self.depths.append(depth)

    def load_phase(self, phase: str, seconds: float) -> None:
        pass

    def cold_start(self) -> None:
        pass

    def memory(self, host_bytes: int, device_bytes: int) -> None:
        pass


def row(value: float, rows: int = 1) -> dict[str, np.ndarray]:
    return {"x": np.full((rows, 4), value, dtype=np.float32)}


_LOOPS: dict[str, Callable[[Any], Any]] = {"asyncio": asyncio.run, "uvloop": uvloop.run}
_run_loop = asyncio.run


@pytest.fixture(autouse=True, params=sorted(_LOOPS))
def event_loop_kind(request: pytest.FixtureRequest) -> Any:
    """Every scenario runs on asyncio's loop and on uvloop, which serving uses: their
    timers differ (uvloop turns a delay under a millisecond into a ``call_soon``)."""
    global _run_loop
    _run_loop = _LOOPS[request.param]
    yield request.param
    _run_loop = asyncio.run


def run(
    scenario: Callable[[Batcher, CountingModel, RecordingObserver], Awaitable[Any]],
    model: CountingModel | None = None,
    **config: Any,
) -> Any:
    model = model or CountingModel()
    observer = RecordingObserver()
    executor = ThreadExecutor(model, instances=config.pop("instances", 1))

    async def main() -> Any:
        batcher = Batcher(executor, BatchingConfig(**config), observer, name="o/m:1")
        try:
            return await scenario(batcher, model, observer)
        finally:
            await batcher.drain()

    try:
        return _run_loop(main())
    finally:
        executor.close()


def soon(seconds: float = 5.0) -> float:
    return time.monotonic() + seconds


async def wait_started(model: CountingModel) -> None:
    while not model.started.is_set():
        await asyncio.sleep(0.001)


def test_concurrent_requests_are_merged_and_answered_exactly() -> None:
    async def scenario(batcher: Batcher, model: CountingModel, obs: RecordingObserver):
        model.gate.clear()
        first = asyncio.ensure_future(batcher.submit(row(0), deadline=soon()))
        await wait_started(model)  # the executor is busy with the first request
        rest = [
            asyncio.ensure_future(batcher.submit(row(i, rows=i), deadline=soon()))
            for i in range(1, 6)
        ]
        await asyncio.sleep(0.01)
        model.gate.set()
        return await first, await asyncio.gather(*rest)

    model = CountingModel()
    first, rest = run(scenario, model, max_batch_size=64)
    assert model.executions == [1, 15]  # 1+2+3+4+5 rows merged into one execution
    assert first.timings.batch_size == 1
    for i, result in enumerate(rest, start=1):
        np.testing.assert_array_equal(result.outputs["y"], np.full((i, 4), i + 1, np.float32))
        assert result.timings.batch_size == 15 and result.timings.batch_requests == 5
        assert result.timings.queue_seconds > 0.005
        assert result.timings.execute_seconds >= 0


def test_batching_off_executes_each_request_alone() -> None:
    async def scenario(batcher: Batcher, model: CountingModel, obs: RecordingObserver):
        model.gate.clear()
        futures = [asyncio.ensure_future(batcher.submit(row(i), deadline=soon())) for i in range(4)]
        await asyncio.sleep(0.01)
        model.gate.set()
        return await asyncio.gather(*futures)

    model = CountingModel()
    results = run(scenario, model, max_batch_size=1)
    assert model.executions == [1, 1, 1, 1]
    assert [r.timings.batch_requests for r in results] == [1, 1, 1, 1]


def test_max_queue_delay_waits_for_company() -> None:
    async def scenario(batcher: Batcher, model: CountingModel, obs: RecordingObserver):
        a = asyncio.ensure_future(batcher.submit(row(1), deadline=soon()))
        await asyncio.sleep(0)  # a is queued, waiting for company
        b = asyncio.ensure_future(batcher.submit(row(2), deadline=soon()))
        return await a, await b

    model = CountingModel()
    # A second of waiting for company: b arrives within it even when a loaded machine
    # stalls the loop.
    a, b = run(scenario, model, max_batch_size=8, max_queue_delay_us=1_000_000)
    assert b.timings.batch_requests == 2
    assert model.executions == [2]
    assert a.timings.queue_seconds >= 0.9


def test_a_queue_delay_under_a_millisecond_merges_requests_arriving_together() -> None:
    """Requests queued in the same loop iteration, with a wait for company shorter than
    a millisecond (a ``call_soon`` on uvloop), are merged and all answered."""

    async def scenario(batcher: Batcher, model: CountingModel, obs: RecordingObserver):
        futures = [asyncio.ensure_future(batcher.submit(row(i), deadline=soon())) for i in range(3)]
        return await asyncio.gather(*futures)

    model = CountingModel()
    results = run(scenario, model, max_batch_size=8, max_queue_delay_us=300)
    assert sum(model.executions) == 3
    for i, result in enumerate(results):
        np.testing.assert_array_equal(result.outputs["y"], np.full((1, 4), i + 1, np.float32))


def test_callers_kept_in_flight_leave_as_full_batches_without_a_queue_delay() -> None:
    """16 callers, each sending its next call as soon as it has its answer: every batch
    holds all 16 (the calls a finished batch's answers provoke meet in the queue), not
    one call alone and then the other 15."""

    async def scenario(batcher: Batcher, model: CountingModel, obs: RecordingObserver):
        async def caller(i: int) -> None:
            for _ in range(4):
                result = await batcher.submit(row(i), deadline=soon(60))
                np.testing.assert_array_equal(result.outputs["y"], row(i + 1)["x"])

        await asyncio.gather(*(caller(i) for i in range(16)))

    model = CountingModel()
    run(scenario, model, max_batch_size=64, max_queue_delay_us=0)
    assert model.executions == [16, 16, 16, 16]


def test_expired_requests_are_dropped_before_execution_and_never_run() -> None:
    async def scenario(batcher: Batcher, model: CountingModel, obs: RecordingObserver):
        model.gate.clear()
        busy = asyncio.ensure_future(batcher.submit(row(0), deadline=soon()))
        await wait_started(model)
        doomed = asyncio.ensure_future(batcher.submit(row(7), deadline=soon(0.05)))
        with pytest.raises(DeadlineExceeded) as info:
            await doomed
        assert info.value.code == "deadline_exceeded"
        model.gate.set()
        await busy
        later = await batcher.submit(row(3), deadline=soon())
        return later

    model = CountingModel()
    later = run(scenario, model, max_batch_size=8)
    assert model.executions == [1, 1]  # the doomed request never reached the model
    np.testing.assert_array_equal(later.outputs["y"], np.full((1, 4), 4, np.float32))


def test_a_deadline_already_passed_is_refused_without_queueing() -> None:
    async def scenario(batcher: Batcher, model: CountingModel, obs: RecordingObserver):
        with pytest.raises(DeadlineExceeded):
            await batcher.submit(row(1), deadline=time.monotonic() - 1)

    model = CountingModel()
    run(scenario, model)
    assert model.executions == []


def test_a_deadline_passing_during_execution_answers_in_time() -> None:
    async def scenario(batcher: Batcher, model: CountingModel, obs: RecordingObserver):
        model.gate.clear()
        started = time.monotonic()
        with pytest.raises(DeadlineExceeded):
            await batcher.submit(row(1), deadline=soon(0.05))
        waited = time.monotonic() - started
        model.gate.set()
        return waited

    # Not the 10 s the held execution would take: answered at the deadline, with room
    # for a loaded machine.
    assert run(scenario) < 5.0


def test_a_full_queue_refuses_at_once_with_retry_after() -> None:
    async def scenario(batcher: Batcher, model: CountingModel, obs: RecordingObserver):
        model.gate.clear()
        busy = asyncio.ensure_future(batcher.submit(row(0), deadline=soon()))
        await wait_started(model)
        queued = [asyncio.ensure_future(batcher.submit(row(i), deadline=soon())) for i in range(2)]
        await asyncio.sleep(0)
        with pytest.raises(Overloaded) as info:
            await batcher.submit(row(9), deadline=soon())
        model.gate.set()
        await asyncio.gather(busy, *queued)
        return info.value

    error = run(scenario, max_batch_size=1, max_queue_size=2)
    assert error.code == "queue_full"
    assert error.extra["retry_after"] > 0


def test_a_predicted_wait_beyond_the_deadline_is_refused_at_once() -> None:
    async def scenario(batcher: Batcher, model: CountingModel, obs: RecordingObserver):
        await batcher.submit(row(0), deadline=soon())  # teaches the ~50 ms execution time
        model.gate.clear()
        busy = asyncio.ensure_future(batcher.submit(row(0), deadline=soon()))
        await wait_started(model)
        queued = [asyncio.ensure_future(batcher.submit(row(i), deadline=soon())) for i in range(5)]
        await asyncio.sleep(0)
        # Refused by the prediction while the first execution is still held: not left
        # to wait for its deadline (which would fail it as expired, not overloaded).
        with pytest.raises(Overloaded) as info:
            await batcher.submit(row(9), deadline=soon(0.1))
        held = not busy.done()
        model.gate.set()
        await asyncio.gather(busy, *queued)
        return info.value, held

    error, held = run(scenario, CountingModel(delay=0.05), max_batch_size=1)
    assert error.code == "queue_full"
    assert "predicted wait" in error.message
    assert held


def test_interactive_requests_overtake_queued_batch_requests() -> None:
    async def scenario(batcher: Batcher, model: CountingModel, obs: RecordingObserver):
        model.gate.clear()
        order: list[str] = []

        async def call(tag: str, value: float, priority: Priority) -> InferenceResult:
            result = await batcher.submit(row(value), deadline=soon(), priority=priority)
            order.append(tag)
            return result

        busy = asyncio.ensure_future(call("busy", 0, Priority.BATCH))
        await wait_started(model)
        bulk = [asyncio.ensure_future(call(f"b{i}", i, Priority.BATCH)) for i in range(3)]
        await asyncio.sleep(0.01)
        urgent = asyncio.ensure_future(call("i", 100, Priority.INTERACTIVE))
        await asyncio.sleep(0.01)
        model.gate.set()
        await asyncio.gather(busy, urgent, *bulk)
        return order

    model = CountingModel()
    assert run(scenario, model, max_batch_size=1) == ["busy", "i", "b0", "b1", "b2"]


def test_offline_requests_wait_for_every_interactive_and_batch_request() -> None:
    async def scenario(batcher: Batcher, model: CountingModel, obs: RecordingObserver):
        model.gate.clear()
        order: list[str] = []

        async def call(tag: str, value: float, priority: Priority) -> InferenceResult:
            result = await batcher.submit(row(value), deadline=soon(), priority=priority)
            order.append(tag)
            return result

        busy = asyncio.ensure_future(call("busy", 0, Priority.OFFLINE))
        await wait_started(model)
        offline = [asyncio.ensure_future(call(f"o{i}", i, Priority.OFFLINE)) for i in range(2)]
        await asyncio.sleep(0.01)
        bulk = asyncio.ensure_future(call("b", 50, Priority.BATCH))
        urgent = asyncio.ensure_future(call("i", 100, Priority.INTERACTIVE))
        await asyncio.sleep(0.01)
        model.gate.set()
        await asyncio.gather(busy, urgent, bulk, *offline)
        return order, obs.classes

    order, classes = run(scenario, CountingModel(), max_batch_size=1)
    # The offline batch already executing finishes; then interactive, batch, offline.
    assert order == ["busy", "i", "b", "o0", "o1"]
    assert classes == ["offline", "offline", "offline", "batch", "interactive"]


def test_offline_requests_hold_at_most_their_share_of_the_queue() -> None:
    async def scenario(batcher: Batcher, model: CountingModel, obs: RecordingObserver):
        model.gate.clear()
        busy = asyncio.ensure_future(batcher.submit(row(0), deadline=soon()))
        await wait_started(model)
        offline = [
            asyncio.ensure_future(
                batcher.submit(row(i), deadline=soon(), priority=Priority.OFFLINE)
            )
            for i in range(2)
        ]
        await asyncio.sleep(0)
        with pytest.raises(Overloaded) as refused:
            await batcher.submit(row(9), deadline=soon(), priority=Priority.OFFLINE)
        # The rest of the queue is still there for interactive and batch requests.
        others = [
            asyncio.ensure_future(batcher.submit(row(i), deadline=soon(), priority=p))
            for i, p in enumerate((Priority.INTERACTIVE, Priority.BATCH))
        ]
        await asyncio.sleep(0)
        with pytest.raises(Overloaded) as full:
            await batcher.submit(row(9), deadline=soon())
        model.gate.set()
        await asyncio.gather(busy, *offline, *others)
        return refused.value, full.value, obs.outcomes

    refused, full, outcomes = run(
        scenario, max_batch_size=1, max_queue_size=4, offline_queue_share=0.5
    )
    assert refused.code == "queue_full" and "offline requests queued" in refused.message
    assert refused.extra["retry_after"] > 0
    assert full.code == "queue_full" and "4 requests queued" in full.message
    assert outcomes.count("queue_full") == 2 and outcomes.count("success") == 5


def test_a_failing_batch_fails_every_request_in_it() -> None:
    async def scenario(batcher: Batcher, model: CountingModel, obs: RecordingObserver):
        model.gate.clear()
        busy = asyncio.ensure_future(batcher.submit(row(0), deadline=soon()))
        await wait_started(model)
        model.fail_with = RuntimeError("boom")
        batch = [asyncio.ensure_future(batcher.submit(row(i), deadline=soon())) for i in range(3)]
        await asyncio.sleep(0.01)
        model.gate.set()
        results = await asyncio.gather(busy, *batch, return_exceptions=True)
        return results

    model = CountingModel()
    results = run(scenario, model, max_batch_size=8)
    assert model.executions == [1, 3]
    assert all(isinstance(r, Internal) and r.code == "execution_failed" for r in results)
    assert "boom" in results[1].message


def test_incompatible_requests_are_not_merged() -> None:
    async def scenario(batcher: Batcher, model: CountingModel, obs: RecordingObserver):
        model.gate.clear()
        busy = asyncio.ensure_future(batcher.submit(row(0), deadline=soon()))
        await wait_started(model)
        a = asyncio.ensure_future(batcher.submit(row(1), deadline=soon(), parameters={"t": 1}))
        b = asyncio.ensure_future(batcher.submit(row(2), deadline=soon(), parameters={"t": 2}))
        c = asyncio.ensure_future(batcher.submit(row(3), deadline=soon(), parameters={"t": 1}))
        await asyncio.sleep(0.01)
        model.gate.set()
        return await asyncio.gather(busy, a, b, c)

    model = CountingModel()
    _, a, b, c = run(scenario, model, max_batch_size=8)
    assert sorted(model.executions) == [1, 1, 2]
    assert a.timings.batch_requests == c.timings.batch_requests == 2
    assert b.timings.batch_requests == 1


def test_a_cancelled_caller_is_taken_out_of_the_queue() -> None:
    async def scenario(batcher: Batcher, model: CountingModel, obs: RecordingObserver):
        model.gate.clear()
        busy = asyncio.ensure_future(batcher.submit(row(0), deadline=soon()))
        await wait_started(model)
        gone = asyncio.ensure_future(batcher.submit(row(5), deadline=soon()))
        await asyncio.sleep(0.01)
        gone.cancel()
        await asyncio.sleep(0.01)
        model.gate.set()
        await busy
        return batcher.queued, obs.outcomes

    model = CountingModel()
    queued, outcomes = run(scenario, model, max_batch_size=8)
    assert queued == 0
    assert model.executions == [1]
    assert sorted(outcomes) == ["cancelled", "success"]


def test_drain_answers_queued_requests_and_refuses_new_ones() -> None:
    async def scenario(batcher: Batcher, model: CountingModel, obs: RecordingObserver):
        model.gate.clear()
        futures = [asyncio.ensure_future(batcher.submit(row(i), deadline=soon())) for i in range(3)]
        await asyncio.sleep(0.01)
        drained = asyncio.ensure_future(batcher.drain())
        await asyncio.sleep(0)
        with pytest.raises(Unavailable) as info:
            await batcher.submit(row(9), deadline=soon())
        model.gate.set()
        await drained
        return await asyncio.gather(*futures), info.value

    results, error = run(scenario, max_batch_size=1)
    assert len(results) == 3
    assert error.code == "model_unloading"


def test_outcomes_and_batch_sizes_are_reported() -> None:
    async def scenario(batcher: Batcher, model: CountingModel, obs: RecordingObserver):
        await asyncio.gather(*(batcher.submit(row(i), deadline=soon()) for i in range(3)))
        return obs

    obs = run(scenario, max_batch_size=8)
    assert obs.outcomes == ["success"] * 3
    assert sum(obs.batches) == 3
    assert len(obs.queue_waits) == 3
    assert obs.depths[-1] == 0


def test_the_predicted_wait_counts_the_requests_ahead_of_each_class() -> None:
    """What degradation under load reads: nothing queued waits nothing; a request waits
    behind its class and the more urgent ones, at the learnt execution time."""

    async def scenario(batcher: Batcher, model: CountingModel, obs: RecordingObserver):
        idle = batcher.predicted_wait(Priority.OFFLINE)
        await batcher.submit(row(0), deadline=soon())  # teaches the ~50 ms execution time
        model.gate.clear()
        busy = asyncio.ensure_future(batcher.submit(row(0), deadline=soon()))
        await wait_started(model)
        queued = [
            asyncio.ensure_future(batcher.submit(row(i), deadline=soon(), priority=priority))
            for i, priority in enumerate([Priority.INTERACTIVE, Priority.BATCH, Priority.BATCH])
        ]
        await asyncio.sleep(0)
        waits = {p: batcher.predicted_wait(p) for p in Priority}
        model.gate.set()
        await asyncio.gather(busy, *queued)
        return idle, waits

    idle, waits = run(scenario, CountingModel(delay=0.05), max_batch_size=1)
    assert idle == 0.0
    # Batch requests wait behind the interactive one too; no offline one is queued.
    assert 0 < waits[Priority.INTERACTIVE] < waits[Priority.BATCH] == waits[Priority.OFFLINE]
