"""The background loops of metering: a step that keeps failing backs off instead of
spinning; one that succeeds again runs at its interval again."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest

from modelport.background import loops
from modelport.background.loops import BackgroundLoop


class Waits(threading.Event):
    """The loop's waits between steps, recorded instead of waited: what the loop asks
    for does not depend on how fast a loaded machine runs it."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[float | None] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.asked.append(timeout)
        return self.is_set()


def run_until(
    loop: BackgroundLoop, done: threading.Event, monkeypatch: pytest.MonkeyPatch
) -> Waits:
    """Run ``loop`` until ``done``, on a clock that stands still (a step takes no time)."""
    monkeypatch.setattr(loops, "time", SimpleNamespace(monotonic=lambda: 0.0))
    waits = Waits()
    loop._kick = waits
    loop.start()
    try:
        assert done.wait(30), "the loop never got that far"
    finally:
        loop.stop()
    return waits


def test_a_failing_step_backs_off_instead_of_spinning(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = 0
    done = threading.Event()

    def step() -> None:
        nonlocal calls
        calls += 1
        if calls == 10:
            done.set()
        raise ConnectionError("the service is down")

    waits = run_until(BackgroundLoop("failing", step, 0.0), done, monkeypatch)
    # Waits of 0.05, 0.1, 0.2 s..., up to 5 s: a handful of tries, not thousands.
    assert waits.asked[:9] == [0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0]


def test_a_step_that_succeeds_again_runs_at_its_interval_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = 0
    done = threading.Event()

    def step() -> None:
        nonlocal calls
        calls += 1
        if calls == 30:
            done.set()
        if calls <= 3:
            raise ConnectionError("the service is down")

    waits = run_until(BackgroundLoop("recovering", step, 0.001), done, monkeypatch)
    assert waits.asked[:3] == [0.05, 0.1, 0.2]
    assert waits.asked[3:29] == [0.001] * 26  # no backoff left once a step succeeded
