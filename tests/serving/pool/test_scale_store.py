"""The autoscaler's shared state on the real Redis: a first target never overwrites
one set, a wake raises a target to at least one and never lowers it, and a version's
last call only moves forward, whichever gateway reports it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
import redis

from modelport.clock import ManualClock
from modelport.keyspace import Keyspace
from modelport.serving.pool.placement import PlacerLock
from modelport.serving.pool.registry import RedisWorkerRegistry
from modelport.serving.pool.scaler import CallCounter, PoolScaler, RedisScaleStore
from modelport.serving.pool.scaling import Bounds, ScalePolicy
from modelport.serving.pool.types import READY, WorkerInfo
from modelport.serving.pool.view import PoolView
from tests.metering import conftest as metering_fixtures

redis_url = metering_fixtures.redis_url


@pytest.fixture
def store(redis_url: str) -> Iterator[RedisScaleStore]:
    client = redis.Redis.from_url(redis_url)
    keys = Keyspace(uuid.uuid4().hex)
    yield RedisScaleStore(client, keys)
    for name in client.scan_iter(f"{keys.prefix}*"):
        client.delete(name)
    client.close()


def test_targets_start_once_and_wake_to_at_least_one(store: RedisScaleStore) -> None:
    assert store.initial("a/m:1", 2, at=100.0) == 2
    assert store.initial("a/m:1", 1, at=200.0) == 2  # another gateway's start: kept
    store.set_target("a/m:1", 0)
    assert store.wake("a/m:1", at=300.0) == 0
    assert store.targets() == {"a/m:1": 1}
    store.set_target("a/m:1", 3)
    assert store.wake("a/m:1", at=310.0) == 3
    assert store.targets() == {"a/m:1": 3}  # a wake never lowers a target
    assert store.calls() == ({}, {"a/m:1": 310.0})


def test_calls_add_up_and_the_last_call_only_moves_forward(store: RedisScaleStore) -> None:
    store.add_calls({"a/m:1": 3, "a/n:1": 1}, {"a/m:1": 50.0, "a/n:1": 40.0})
    store.add_calls({"a/m:1": 2}, {"a/m:1": 45.0})  # a gateway reporting late
    assert store.calls() == ({"a/m:1": 5, "a/n:1": 1}, {"a/m:1": 50.0, "a/n:1": 40.0})
    store.forget(["a/m:1"])
    assert store.calls() == ({"a/n:1": 1}, {"a/n:1": 40.0})
    assert store.targets() == {}


def test_a_wake_while_the_scaler_decides_is_not_undone(store: RedisScaleStore) -> None:
    """The scaler reads the targets and last calls, decides, then writes: a call that
    woke the version (or was counted by another gateway) in between is not lost to a
    scale-down decided on what was read before it."""
    clock = ManualClock()
    view = PoolView(RedisWorkerRegistry(store.client, Keyspace(uuid.uuid4().hex)), clock=clock)
    view.refresh()  # fresh, no worker: the version has no ready replica
    ref = "a/m:1"
    policy = ScalePolicy(idle_seconds=60.0)
    store.initial(ref, 1, at=clock.now().timestamp())
    clock.advance(policy.idle_seconds)
    woken: list[int] = []

    def bounds() -> dict[str, Bounds]:
        # A call arrives after the scaler read the shared state: it wakes the version.
        woken.append(store.wake(ref, clock.now().timestamp()))
        return {ref: Bounds(0, 2)}

    lock = PlacerLock(store.client, Keyspace(uuid.uuid4().hex), "gw", ttl_seconds=10.0)
    scaler = PoolScaler(
        view,
        store,
        lock,
        CallCounter(clock),
        wanted=lambda: [ref],
        bounds=bounds,
        kick=lambda: None,
        policy=policy,
        clock=clock,
    )
    scaler.step()
    assert woken == [1]
    assert store.targets() == {ref: 1}  # the woken call still has its replica coming


def test_the_wait_seen_while_another_gateway_held_the_lock_keeps_a_version_from_shrinking(
    store: RedisScaleStore,
) -> None:
    """Each gateway takes the scaler's lock at some steps only: a busy spell it saw at a
    step another gateway decided still restarts its calm, so the replica is not removed
    before the wait has been calm for ``scale_down_after_seconds``."""
    clock = ManualClock()
    keys = Keyspace(uuid.uuid4().hex)
    registry = RedisWorkerRegistry(store.client, keys)
    view = PoolView(registry, clock=clock)
    ref = "a/m:1"

    def report(wait: float) -> None:
        for worker in ("w1", "w2"):
            info = WorkerInfo(
                id=worker, address=f"{worker}:1", versions={ref: READY}, waits={ref: wait}
            )
            registry.announce(info, lease_seconds=60.0)
        view.refresh()

    policy = ScalePolicy(target_wait_seconds=0.5, scale_down_after_seconds=60.0)
    lock = PlacerLock(store.client, keys, "this-gateway", ttl_seconds=10.0, name="scaler")
    scaler = PoolScaler(
        view,
        store,
        lock,
        CallCounter(clock),
        wanted=lambda: [ref],
        bounds=lambda: {ref: Bounds(1, 2)},
        kick=lambda: None,
        policy=policy,
        clock=clock,
    )
    store.initial(ref, 2, at=clock.now().timestamp())
    report(0.0)
    scaler.step()  # calm from here
    clock.advance(50.0)
    report(2.0)  # busy: another gateway holds the lock at this step
    other = PlacerLock(store.client, keys, "other-gateway", ttl_seconds=10.0, name="scaler")
    assert other.acquire()
    scaler.step()
    other.release()
    clock.advance(20.0)
    report(0.0)  # calm again, for 20 s only
    scaler.step()
    assert store.targets() == {ref: 2}
    clock.advance(policy.scale_down_after_seconds)
    scaler.step()
    assert store.targets() == {ref: 1}  # calm long enough now
