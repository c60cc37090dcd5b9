"""A call's deadline is on the clock it is given: a ``ManualClock`` moves a call past
its deadline (queued on the batcher, before the dispatcher's attempt) with no real wait."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import numpy as np
import pytest

from modelport.clock import ManualClock
from modelport.errors import DeadlineExceeded
from modelport.runtime.types import VersionKey
from modelport.serving.backends.fake import FakeBackend
from modelport.serving.breaker import BreakerConfig
from modelport.serving.dispatch import Dispatcher
from modelport.serving.health import HealthBoard
from tests.runtime.conftest import DictBlobSource, FakeFormat, HostFactory, fake_manifest
from tests.serving.backend_support import request_for, version_ref

X = {"x": np.zeros((1, 4), np.float32)}


def test_a_manual_timer_runs_once_the_clock_passes_it_and_never_once_cancelled() -> None:
    clock = ManualClock()

    async def scenario() -> list[str]:
        fired: list[str] = []
        clock.call_later(5, fired.append, "due")
        kept = clock.call_later(5, fired.append, "cancelled")
        clock.call_later(10, fired.append, "later")
        kept.cancel()
        clock.advance(4.9)
        await asyncio.sleep(0)
        assert fired == [] and clock.timers == 2
        clock.advance(0.1)
        await asyncio.sleep(0)
        return fired

    assert asyncio.run(scenario()) == ["due"]


def test_a_call_whose_deadline_passes_while_queued_gets_its_timeout_code(
    make_host: HostFactory, source: DictBlobSource, fake_format: FakeFormat
) -> None:
    clock = ManualClock()
    host = make_host(clock=clock)
    manifest, digest = fake_manifest(source)
    key = VersionKey("acme/held", "1", digest)
    host.load(key, manifest, source)
    model = fake_format.models[0]
    model.gate.clear()

    async def scenario() -> tuple[DeadlineExceeded, object]:
        # A deadline an hour away on the real clock is never reached by real time here.
        busy = asyncio.ensure_future(host.infer(key, X, deadline=clock.monotonic() + 3600))
        await asyncio.to_thread(model.started.wait, 5)
        queued = asyncio.ensure_future(host.infer(key, X, deadline=clock.monotonic() + 60))
        await asyncio.sleep(0)
        assert not queued.done()
        clock.advance(59.5)
        await asyncio.sleep(0)
        assert not queued.done()  # not yet: 0.5 s left on the call's clock
        clock.advance(0.5)
        with pytest.raises(DeadlineExceeded) as info:
            # Bounded only so a real-time expiry (a minute) fails the test, not hangs it.
            await asyncio.wait_for(queued, 10)
        model.gate.set()
        return info.value, await busy

    error, answered = asyncio.run(scenario())
    assert error.code == "deadline_exceeded"
    assert "while the request was queued" in error.message
    assert answered is not None
    assert model.executions == [1]  # the expired call never ran


def test_the_dispatcher_reads_the_deadline_on_its_clock() -> None:
    clock = ManualClock()
    board = HealthBoard(BreakerConfig(min_calls=10), clock=clock.monotonic)
    dispatcher = Dispatcher(board, clock=clock)
    backend = FakeBackend("a", clock=clock)
    request = replace(request_for(version_ref()), deadline=clock.monotonic() + 5)

    served = asyncio.run(dispatcher.dispatch(request, [backend]))
    assert served.provenance.backend == "a"

    clock.advance(5)
    with pytest.raises(DeadlineExceeded) as info:
        asyncio.run(dispatcher.dispatch(request, [backend]))
    assert info.value.code == "deadline_exceeded"
    assert len(backend.calls) == 1  # the second never reached the backend
