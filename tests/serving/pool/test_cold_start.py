"""A call waiting for a cold version: waking it (a Redis round trip, which may hang
until its timeout while Redis is away) runs off the event loop, so the gateway's other
calls go on meanwhile."""

from __future__ import annotations

import asyncio
import threading
import uuid

import pytest
import redis

from modelport.clock import ManualClock
from modelport.errors import Unavailable
from modelport.keyspace import Keyspace
from modelport.serving.pool.registry import RedisWorkerRegistry
from modelport.serving.pool.replicas import COLD_START, ColdStart
from modelport.serving.pool.view import PoolView
from tests.metering import conftest as metering_fixtures

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
