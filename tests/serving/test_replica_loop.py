"""Whole calls and streams go through one replica loop: the same failures give the same
attempts, breaker counts, metrics, retries, attempt timeouts and fallbacks in both
modes (``Dispatcher.dispatch`` and ``Dispatcher.open_stream``)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import numpy as np
import pytest
from prometheus_client import CollectorRegistry

from modelport.errors import InvalidInput, Overloaded, Unavailable
from modelport.observability.serving_metrics import ServingMetrics
from modelport.serving.breaker import BreakerConfig, BreakerState
from modelport.serving.dispatch import DispatchConfig, Dispatcher
from modelport.serving.fallback import FallbackOption, VersionOption
from modelport.serving.health import HealthBoard
from modelport.serving.types import (
    BackendRequest,
    BackendResponse,
    Capabilities,
    FallbackKind,
    Health,
    Provenance,
    StreamChunk,
    StreamRequest,
    VersionRef,
)
from tests.serving.backend_support import version_ref

IO: dict[str, Any] = {
    "inputs": [{"name": "prompt", "datatype": "BYTES", "shape": [1]}],
    "outputs": [{"name": "text", "datatype": "BYTES", "shape": [1]}],
}
PRIMARY = version_ref("acme/writer", "1", fmt="toy", **IO)
OTHER = version_ref("acme/writer", "2", fmt="toy", **IO)
CAPS = Capabilities(formats=frozenset({"toy"}))
MODES = ["unary", "stream"]


class TwoWay:
    """A backend that answers a whole call and a stream alike, or fails both with
    ``fail`` before any answer, or never starts either (``hang``)."""

    def __init__(self, name: str, *, fail: Exception | None = None, hang: bool = False) -> None:
        self.name = name
        self.fail, self.hang = fail, hang
        self.calls = 0

    def capabilities(self) -> Capabilities:
        return CAPS

    async def health(self) -> Health:
        return Health.HEALTHY

    async def close(self) -> None:
        pass

    async def _start(self) -> None:
        self.calls += 1
        if self.hang:
            await asyncio.Event().wait()  # until the attempt is given up
        if self.fail is not None:
            raise self.fail

    async def infer(self, request: BackendRequest) -> BackendResponse:
        await self._start()
        return BackendResponse({"text": np.array([self.name.encode()], dtype=object)}, self.name)

    async def stream(self, request: StreamRequest) -> AsyncIterator[StreamChunk]:
        await self._start()
        yield StreamChunk(0, self.name, 1, self.name, finish_reason="stop")


def make(*, min_calls: int = 100, **config: Any) -> tuple[Dispatcher, HealthBoard, ServingMetrics]:
    metrics = ServingMetrics(CollectorRegistry())
    breakers = BreakerConfig(min_calls=min_calls, failure_rate=1.0, window_seconds=60)
    board = HealthBoard(breakers, metrics=metrics)
    return Dispatcher(board, config=DispatchConfig(**config), metrics=metrics), board, metrics


def call(
    mode: str,
    dispatcher: Dispatcher,
    replicas: list[TwoWay],
    fallback: list[FallbackOption] | None = None,
    version: VersionRef = PRIMARY,
) -> Provenance:
    """The provenance of a whole call or of a stream read to its end."""

    async def scenario() -> Provenance:
        deadline = time.monotonic() + 30
        if mode == "unary":
            inputs = {"prompt": np.array([b"hi"], dtype=object)}
            request = BackendRequest(version, inputs, deadline)
            served = await dispatcher.dispatch(request, replicas, fallback=fallback or ())
            return served.provenance
        opened = await dispatcher.open_stream(
            StreamRequest(version, "hi", 8, deadline), replicas, fallback=fallback or ()
        )
        async for _ in opened.rest:
            pass
        return opened.provenance

    return asyncio.run(scenario())


def attempts(metrics: ServingMetrics, backend: str, outcome: str) -> float:
    labels = {"backend": backend, "outcome": outcome}
    return metrics.registry.get_sample_value("modelport_serving_attempts_total", labels) or 0.0


@pytest.mark.parametrize("mode", MODES)
def test_failures_are_retried_within_the_budget_then_the_chain_falls_back(mode: str) -> None:
    dispatcher, board, metrics = make(max_attempts=3)
    down = TwoWay("down", fail=Unavailable("down", code="backend_unreachable"))
    busy = TwoWay("busy", fail=Overloaded("full", code="queue_full"))
    buggy = TwoWay("buggy", fail=RuntimeError("bug"))
    spare = TwoWay("spare")  # fourth: beyond the budget of three attempts
    other = TwoWay("other")
    provenance = call(
        mode, dispatcher, [down, busy, buggy, spare], [VersionOption(OTHER, (other,))]
    )
    assert (provenance.version, provenance.backend) == (OTHER, "other")
    assert provenance.fallback is FallbackKind.VERSION
    assert provenance.reason == "backend_error"  # the last failure of the primary
    assert [(a.backend, a.version, a.outcome) for a in provenance.attempts] == [
        ("down", PRIMARY.ref, "backend_unreachable"),
        ("busy", PRIMARY.ref, "queue_full"),
        ("buggy", PRIMARY.ref, "backend_error"),
        ("other", OTHER.ref, "ok"),
    ]
    assert spare.calls == 0
    assert [board.breaker(b.name).snapshot().failures for b in (down, busy, buggy)] == [1, 0, 1]
    assert board.breaker("other").snapshot().calls == 1  # its success was heard
    assert attempts(metrics, "down", "failed") == 1
    assert attempts(metrics, "busy", "overloaded") == 1
    assert attempts(metrics, "buggy", "failed") == 1
    assert attempts(metrics, "other", "ok") == 1


@pytest.mark.parametrize("mode", MODES)
def test_an_attempt_that_does_not_start_is_given_up_for_the_next_replica(mode: str) -> None:
    dispatcher, board, metrics = make(attempt_timeout_seconds=0.05)
    stuck, good = TwoWay("stuck", hang=True), TwoWay("good")
    provenance = call(mode, dispatcher, [stuck, good])
    assert provenance.backend == "good" and provenance.fallback is None
    assert [a.outcome for a in provenance.attempts] == ["deadline_exceeded", "ok"]
    assert board.breaker("stuck").snapshot().failures == 1
    assert attempts(metrics, "stuck", "timeout") == 1


@pytest.mark.parametrize("mode", MODES)
def test_a_callers_error_stops_at_once_and_open_breakers_are_skipped(mode: str) -> None:
    dispatcher, board, _ = make(min_calls=1)
    refused = TwoWay("refused", fail=InvalidInput("no", code="invalid_request"))
    fallback: list[FallbackOption] = [VersionOption(OTHER, (TwoWay("other"),))]
    with pytest.raises(InvalidInput):
        call(mode, dispatcher, [refused, TwoWay("next")], fallback)
    assert board.breaker("refused").snapshot().calls == 0

    shut = TwoWay("shut", fail=Unavailable("down", code="backend_unreachable"))
    with pytest.raises(Unavailable):
        call(mode, dispatcher, [shut])
    assert board.breaker("shut").state is BreakerState.OPEN
    with pytest.raises(Unavailable) as caught:
        call(mode, dispatcher, [shut])
    assert caught.value.code == "no_available_backend"
    assert caught.value.extra["backends"] == ["shut"]
    assert shut.calls == 1  # not tried while open
