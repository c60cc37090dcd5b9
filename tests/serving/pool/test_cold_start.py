"""A call waiting for a cold version: waking it (a Redis round trip, which may hang
until its timeout while Redis is away) runs off the event loop, so the gateway's other
calls go on meanwhile."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import AsyncIterator

import pytest
import redis

from modelport.clock import ManualClock
from modelport.errors import Unavailable
from modelport.keyspace import Keyspace
from modelport.serving.pool.registry import RedisWorkerRegistry
from modelport.serving.pool.replicas import COLD_START, ColdStart, NoReadyReplica
from modelport.serving.pool.view import PoolView
from modelport.serving.types import StreamChunk, StreamRequest
from tests.metering import conftest as metering_fixtures
from tests.serving.pool.test_pool_tls import UNKNOWN

redis_url = metering_fixtures.redis_url


def test_waking_a_version_does_not_hold_up_the_event_loop(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    clock = ManualClock()
    view = PoolView(RedisWorkerRegistry(client, Keyspace(uuid.uuid4().hex)), clock=clock)
    view.refresh()  # no worker: nothing is ready
    other_call_ran = threading.Event()
    woke: list[bool] = []

    def wake(ref: str) -> bool:
        # Blocks as a slow Redis would, until another coroutine on the loop has run.
        woke.append(other_call_ran.wait(10))
        return True

    cold = ColdStart(view, wake, clock, retry_after_seconds=1.0)

    async def other_call() -> None:
        other_call_ran.set()

    async def main() -> None:
        other = asyncio.ensure_future(other_call())
        with pytest.raises(Unavailable) as refused:
            await cold.ready("a/m:1", deadline=clock.monotonic())
        assert refused.value.code == COLD_START
        await other

    try:
        asyncio.run(main())
    finally:
        client.close()
    assert woke == [True]


class _Woken:
    """A cold start that finds a worker at once (what ``ColdStart.ready`` answers)."""

    async def ready(self, ref: str, deadline: float) -> object:
        return object()


class _Stream:
    """A worker's stream of two chunks that records being closed."""

    closed = False

    async def stream(self, request: StreamRequest) -> AsyncIterator[StreamChunk]:
        try:
            for i in range(2):
                yield StreamChunk(index=i, text=str(i), output_tokens=1, backend="w")
        finally:
            self.closed = True


def test_a_caller_leaving_a_cold_started_stream_closes_the_workers_stream() -> None:
    inner = _Stream()
    backend = NoReadyReplica(
        "acme/m:1",
        frozenset(),
        frozenset(),
        cold=_Woken(),  # type: ignore[arg-type]
        make=lambda worker: inner,  # type: ignore[arg-type,return-value]
    )
    request = StreamRequest(version=UNKNOWN, prompt="hi", max_tokens=2, deadline=1e9)

    async def main() -> None:
        chunks = backend.stream(request)
        assert (await anext(chunks)).text == "0"
        await chunks.aclose()  # type: ignore[attr-defined]
        assert inner.closed  # now, not when the loop shuts down its generators

    asyncio.run(main())
