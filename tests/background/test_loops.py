"""The background loops of metering: a step that keeps failing backs off instead of
spinning; one that succeeds again runs at its interval again."""

from __future__ import annotations

import threading
import time

from modelport.background.loops import BackgroundLoop


def run_for(loop: BackgroundLoop, seconds: float) -> None:
    loop.start()
    time.sleep(seconds)
    loop.stop()


def test_a_failing_step_backs_off_instead_of_spinning() -> None:
    calls = 0

    def step() -> None:
        nonlocal calls
        calls += 1
        raise ConnectionError("the service is down")

    run_for(BackgroundLoop("failing", step, 0.0), 0.5)
    # Waits of 0.05, 0.1, 0.2 s...: a handful of tries, not thousands.
    assert 2 <= calls <= 10


def test_a_step_that_succeeds_again_runs_at_its_interval_again() -> None:
    calls = 0
    recovered = threading.Event()

    def step() -> None:
        nonlocal calls
        calls += 1
        if calls <= 3:
            raise ConnectionError("the service is down")
        recovered.set()

    loop = BackgroundLoop("recovering", step, 0.001)
    loop.start()
    assert recovered.wait(5)
    at_recovery = calls
    time.sleep(0.3)
    loop.stop()
    assert calls - at_recovery > 20  # no backoff left once a step succeeded
