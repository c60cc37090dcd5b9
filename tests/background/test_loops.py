"""The periodic-task primitive, in a thread and as a task, driven by a manual clock: a
step that keeps failing backs off instead of spinning (and is logged each time); one
that succeeds again runs at its interval again; ``kick`` runs a step at once; ``stop``
ends it, and may be called twice."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable

import pytest

from modelport.background.loops import BackgroundLoop, BackgroundTask
from modelport.clock import ManualClock
from tests.polling import eventually

BACKOFF = [0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0]


class Steps:
    """A step that fails its first ``failures`` calls, counting them."""

    def __init__(self, failures: int = 0) -> None:
        self.calls = 0
        self.failures = failures
        self.lock = threading.Lock()

    def __call__(self) -> None:
        with self.lock:
            self.calls += 1
            if self.calls <= self.failures:
                raise ConnectionError("the service is down")

    async def async_step(self) -> None:
        self()


def parked(clock: ManualClock, steps: Steps, calls: int) -> float:
    """Once the loop has made ``calls`` steps and waits: how long it waits."""
    assert eventually(lambda: steps.calls == calls and len(clock.waits) == 1), steps.calls
    return clock.waits[0]


def test_a_failing_step_backs_off_is_logged_and_retried(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = ManualClock()
    steps = Steps(failures=100)
    loop = BackgroundLoop("failing", steps, 0.0, clock=clock)
    with caplog.at_level(logging.ERROR, logger="modelport.background.loops"):
        loop.start()
        try:
            waits = []
            for calls in range(1, len(BACKOFF) + 1):
                waits.append(parked(clock, steps, calls))
                clock.advance(waits[-1])
            parked(clock, steps, len(BACKOFF) + 1)
        finally:
            loop.stop()
    # Waits of 0.05, 0.1, 0.2 s..., up to 5 s: a handful of tries, not thousands.
    assert waits == pytest.approx(BACKOFF)
    failed = [r for r in caplog.records if r.getMessage().startswith("failing failed")]
    assert len(failed) == len(BACKOFF) + 1
    assert failed[0].exc_info is not None and failed[0].exc_info[0] is ConnectionError


def waits_after_three_failures(interval: float) -> list[float]:
    """The waits a loop parks for over its first five steps, the first three failing."""
    clock = ManualClock()
    steps = Steps(failures=3)
    loop = BackgroundLoop("recovering", steps, interval, clock=clock)
    loop.start()
    try:
        waits = []
        for calls in range(1, 6):
            waits.append(parked(clock, steps, calls))
            clock.advance(waits[-1])
        parked(clock, steps, 6)
    finally:
        loop.stop()
    return waits


def test_a_step_that_succeeds_again_runs_at_its_interval_again() -> None:
    # The backoff is never shorter than the interval, and gone once a step succeeded.
    assert waits_after_three_failures(30.0) == pytest.approx([30.0] * 5)


def test_the_backoff_after_failures_is_reset_by_a_success() -> None:
    assert waits_after_three_failures(0.01) == pytest.approx([0.05, 0.1, 0.2, 0.01, 0.01])


def test_the_backoff_may_start_higher_and_stop_lower() -> None:
    clock = ManualClock()
    steps = Steps(failures=100)
    loop = BackgroundLoop("writer", steps, 1.0, clock=clock, min_backoff=2.0, max_backoff=30.0)
    loop.start()
    try:
        waits = []
        for calls in range(1, 7):
            waits.append(parked(clock, steps, calls))
            clock.advance(waits[-1])
    finally:
        loop.stop()
    assert waits == pytest.approx([2.0, 4.0, 8.0, 16.0, 30.0, 30.0])


def test_kick_runs_the_next_step_at_once_and_stop_ends_the_thread() -> None:
    clock = ManualClock()
    steps = Steps()
    loop = BackgroundLoop("kicked", steps, 60.0, clock=clock)
    loop.start()
    assert parked(clock, steps, 1) == 60.0
    loop.kick()  # the clock has not moved
    assert parked(clock, steps, 2) == 60.0
    thread = next(t for t in threading.enumerate() if t.name == "kicked")
    loop.stop()
    assert not thread.is_alive() and not loop.active
    loop.stop()  # a second stop is harmless
    assert steps.calls == 2


def test_a_loop_with_no_interval_steps_only_when_kicked() -> None:
    clock = ManualClock()
    steps = Steps()
    loop = BackgroundLoop("on-demand", steps, None, clock=clock, first_after=10.0)
    loop.start()
    try:
        assert eventually(lambda: clock.waits == [10.0])  # the first step waits too
        clock.advance(10.0)
        assert eventually(lambda: steps.calls == 1)
        clock.advance(1000.0)
        loop.kick()
        assert eventually(lambda: steps.calls == 2)
    finally:
        loop.stop()
    assert clock.sleepers == 0


async def until(check: Callable[[], bool]) -> None:
    """Let the event loop (and the task under test) run until ``check`` holds."""
    for _ in range(10_000):
        if check():
            return
        await asyncio.sleep(0)
    raise AssertionError("never came true")


def test_the_task_form_backs_off_kicks_and_stops() -> None:
    clock = ManualClock()
    steps = Steps(failures=2)

    async def scenario() -> list[float]:
        task = BackgroundTask("prober", steps.async_step, 30.0, clock=clock, first_after=30.0)
        waits = []
        async with task.running():
            await until(lambda: len(clock.waits) == 1)
            waits.append(clock.waits[0])
            for calls in range(1, 4):
                clock.advance(waits[-1])

                def stepped(c: int = calls) -> bool:
                    return steps.calls == c and len(clock.waits) == 1

                await until(stepped)
                waits.append(clock.waits[0])
            task.kick()
            await until(lambda: steps.calls == 4 and len(clock.waits) == 1)
            await task.stop()  # inside the block: the block's own stop is then a no-op
        assert not task.active and clock.sleepers == 0
        return waits

    waits = asyncio.run(scenario())
    # first_after, then two failures' backoff (never below the interval), then the interval
    assert waits == pytest.approx([30.0, 30.0, 30.0, 30.0])
    assert steps.calls == 4


def test_the_task_form_kicked_from_another_thread() -> None:
    clock = ManualClock()
    steps = Steps()

    async def scenario() -> None:
        async with BackgroundTask("kicked", steps.async_step, None, clock=clock).running() as t:
            await until(lambda: steps.calls == 1)
            kicker = threading.Thread(target=t.kick)
            kicker.start()
            kicker.join()
            await until(lambda: steps.calls == 2)

    asyncio.run(scenario())


def test_a_task_kicked_before_it_starts_steps_at_once() -> None:
    clock = ManualClock()
    steps = Steps()

    async def scenario() -> None:
        task = BackgroundTask("watch", steps.async_step, 60.0, clock=clock, first_after=60.0)
        task.kick()  # a change arrived while its owner was still starting
        async with task.running():
            await until(lambda: steps.calls == 1 and clock.waits == [60.0])

    asyncio.run(scenario())
