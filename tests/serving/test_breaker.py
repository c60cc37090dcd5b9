"""The circuit breaker as a pure state machine on a hand-moved clock."""

from __future__ import annotations

import pytest

from modelport.serving.breaker import BreakerConfig, BreakerState, CircuitBreaker


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def make(**overrides: float) -> tuple[CircuitBreaker, Clock, list[tuple[str, str]]]:
    config = BreakerConfig(
        **{"window_seconds": 10.0, "min_calls": 4, "failure_rate": 0.5, "open_seconds": 5.0}
        | overrides
    )
    clock = Clock()
    changes: list[tuple[str, str]] = []
    breaker = CircuitBreaker(
        config, clock=clock, on_change=lambda a, b: changes.append((a.value, b.value))
    )
    return breaker, clock, changes


def test_stays_closed_below_min_calls_even_when_all_fail() -> None:
    breaker, _, _ = make()
    for _ in range(3):
        assert breaker.try_acquire()
        breaker.on_failure()
    assert breaker.state is BreakerState.CLOSED


def test_opens_at_the_failure_rate_and_refuses_calls() -> None:
    breaker, _, changes = make()
    for ok in (True, False, True, False):
        assert breaker.try_acquire()
        breaker.on_success() if ok else breaker.on_failure()
    assert breaker.state is BreakerState.OPEN
    assert changes == [("closed", "open")]
    assert not breaker.try_acquire()
    snap = breaker.snapshot()
    assert snap.retry_after == pytest.approx(5.0)


def test_below_the_rate_stays_closed() -> None:
    breaker, _, _ = make()
    for ok in (True, True, True, False, True, True, False):
        breaker.try_acquire()
        breaker.on_success() if ok else breaker.on_failure()
    assert breaker.state is BreakerState.CLOSED
    assert breaker.snapshot().calls == 7


def test_old_outcomes_leave_the_window() -> None:
    breaker, clock, _ = make()
    for _ in range(3):
        breaker.on_failure()
    clock.now += 11.0  # the window is 10 s: those failures no longer count
    breaker.on_failure()
    assert breaker.state is BreakerState.CLOSED
    assert breaker.snapshot().calls == 1


def test_half_open_after_cool_down_lets_one_trial_through_and_closes_on_success() -> None:
    breaker, clock, changes = make()
    for _ in range(4):
        breaker.on_failure()
    clock.now += 4.9
    assert breaker.state is BreakerState.OPEN
    clock.now += 0.2
    assert breaker.state is BreakerState.HALF_OPEN
    assert breaker.try_acquire()
    assert not breaker.try_acquire(), "one trial at a time"
    breaker.on_success()
    assert breaker.state is BreakerState.CLOSED
    assert changes == [("closed", "open"), ("open", "half_open"), ("half_open", "closed")]
    # Closed again with a clean window: one failure does not reopen it.
    breaker.on_failure()
    assert breaker.state is BreakerState.CLOSED


def test_a_failed_trial_reopens_and_restarts_the_cool_down() -> None:
    breaker, clock, _ = make()
    for _ in range(4):
        breaker.on_failure()
    clock.now += 5.0
    assert breaker.try_acquire()
    breaker.on_failure()
    assert breaker.state is BreakerState.OPEN
    clock.now += 4.0
    assert breaker.state is BreakerState.OPEN
    clock.now += 1.0
    assert breaker.state is BreakerState.HALF_OPEN


def test_an_ignored_trial_frees_its_slot_without_a_verdict() -> None:
    breaker, clock, _ = make()
    for _ in range(4):
        breaker.on_failure()
    clock.now += 5.0
    assert breaker.try_acquire()
    breaker.on_ignored()
    assert breaker.state is BreakerState.HALF_OPEN
    assert breaker.try_acquire()


def test_half_open_needs_as_many_successes_as_trial_calls() -> None:
    breaker, clock, _ = make(half_open_calls=2)
    for _ in range(4):
        breaker.on_failure()
    clock.now += 5.0
    assert breaker.try_acquire() and breaker.try_acquire()
    assert not breaker.try_acquire()
    breaker.on_success()
    assert breaker.state is BreakerState.HALF_OPEN
    breaker.on_success()
    assert breaker.state is BreakerState.CLOSED


def test_outcomes_of_calls_started_before_a_transition_are_not_counted() -> None:
    breaker, clock, _ = make()
    assert breaker.try_acquire()
    started = breaker.epoch
    for _ in range(4):
        breaker.on_failure()
    assert breaker.state is BreakerState.OPEN
    clock.now += 5.0
    assert breaker.state is BreakerState.HALF_OPEN
    breaker.on_success(started)  # a slow call from before the breaker opened
    assert breaker.state is BreakerState.HALF_OPEN


@pytest.mark.parametrize(
    "bad",
    [
        {"window_seconds": 0},
        {"min_calls": 0},
        {"failure_rate": 0},
        {"failure_rate": 1.5},
        {"half_open_calls": 0},
    ],
)
def test_config_is_checked(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        BreakerConfig(**bad)  # type: ignore[arg-type]
