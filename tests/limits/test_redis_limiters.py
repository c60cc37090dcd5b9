"""The Redis limiters against the real Redis: exact under concurrency from many clients,
Redis-clock waits, leases that outlive a crashed holder only until they expire."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from modelport.errors import Unavailable
from modelport.tenancy.limits import RateItem, SlotItem
from modelport.tenancy.limits.redis import RedisConcurrencyLimiter, RedisGate, RedisRateLimiter
from tests.limits.conftest import KEYS
from tests.limits.test_inprocess import fire_at_once


def test_200_threads_against_50_an_hour_let_exactly_50_through(
    redis_client: redis.Redis,
) -> None:
    limiter = RedisRateLimiter(redis_client, KEYS)
    # An hour's allowance: no unit comes back while a loaded machine fires them all.
    item = [RateItem("t", 50, period=3600)]
    results = fire_at_once(200, lambda: limiter.hit(item).allowed)
    assert results.count(True) == 50


def test_separate_clients_share_one_allowance(redis_url: str) -> None:
    clients = [redis.Redis.from_url(redis_url) for _ in range(4)]
    limiters = [RedisRateLimiter(c, KEYS) for c in clients]
    # An hour's allowance: no unit comes back while a loaded machine fires them all.
    item = [RateItem("shared", 30, period=3600)]
    try:
        counter = iter(range(10_000))
        results = fire_at_once(120, lambda: limiters[next(counter) % 4].hit(item).allowed)
        assert results.count(True) == 30
    finally:
        for c in clients:
            c.close()


def test_decisions_match_the_in_process_algorithm(redis_client: redis.Redis) -> None:
    limiter = RedisRateLimiter(redis_client, KEYS)
    item = [RateItem("t", 60, label="tenant acme")]
    started = time.monotonic()
    first = limiter.hit(item)
    assert (first.allowed, first.limit, first.remaining, first.label) == (
        True,
        60,
        59,
        "tenant acme",
    )
    assert first.reset_after == pytest.approx(1.0, abs=0.05)
    for _ in range(59):
        limiter.hit(item)
    refused = limiter.hit(item)
    # Redis's clock moved by no more than ours around the 61 calls, however slowly a
    # loaded machine made them: the first emission frees up a second after the first.
    elapsed = time.monotonic() - started + 0.001  # Redis rounds to the microsecond
    assert not refused.allowed and refused.remaining == 0
    assert 1.0 - elapsed <= refused.retry_after <= 1.0
    assert 60 - elapsed <= refused.reset_after <= 60


def test_all_or_nothing_and_cost(redis_client: redis.Redis) -> None:
    limiter = RedisRateLimiter(redis_client, KEYS)
    # Hourly: no unit comes back between the calls on a slow machine.
    tenant, key = RateItem("tenant", 10, period=3600), RateItem("key", 2, period=3600)
    assert limiter.hit([tenant, key], cost=2).allowed
    refused = limiter.hit([tenant, key])
    assert not refused.allowed and refused.bucket == "key"
    assert limiter.hit([tenant]).remaining == 7


def test_keys_expire_once_the_allowance_is_whole(redis_client: redis.Redis) -> None:
    limiter = RedisRateLimiter(redis_client, KEYS)
    limiter.hit([RateItem("fast", 60_000)])  # whole again after 1 ms
    time.sleep(0.05)
    assert list(redis_client.scan_iter(KEYS.name("limits", "rate", "fast"))) == []


def test_concurrency_limit_is_exact_under_threads(redis_client: redis.Redis) -> None:
    slots = RedisConcurrencyLimiter(redis_client, KEYS, lease_seconds=30)
    try:
        item = [SlotItem("t", 5)]
        results = fire_at_once(100, lambda: slots.acquire(item))
        leases = [r.lease for r in results if r.lease is not None]
        assert len(leases) == 5
        assert slots.in_use("t") == 5
        for lease in leases:
            slots.release(lease)
        assert slots.in_use("t") == 0
    finally:
        slots.close()


def test_refusal_names_the_full_bucket_and_takes_nothing(redis_client: redis.Redis) -> None:
    slots = RedisConcurrencyLimiter(redis_client, KEYS)
    try:
        tenant, key = SlotItem("tenant", 3), SlotItem("key", 1)
        held = slots.acquire([tenant, key]).lease
        assert held is not None
        refused = slots.acquire([tenant, key])
        assert refused.lease is None and refused.refused == key
        assert slots.in_use("tenant") == 1
        slots.release(held)
        slots.release(held)
        assert slots.in_use("tenant") == 0 and slots.in_use("key") == 0
    finally:
        slots.close()


def _first_expiry_passed(client: redis.Redis, bucket: str) -> None:
    """Wait (by Redis's clock, which the leases use) until the lease now held in
    ``bucket`` is past the expiry it has at this moment."""
    ((_, expiry),) = client.zrange(KEYS.name("limits", "slots", bucket), 0, -1, withscores=True)
    deadline = time.monotonic() + 60
    while True:
        seconds, micros = client.time()
        if seconds * 1000 + micros // 1000 > expiry:
            return
        assert time.monotonic() < deadline, "Redis's clock never reached the expiry"
        time.sleep(0.05)


def test_live_leases_are_renewed_past_their_expiry(redis_client: redis.Redis) -> None:
    # Renewed each second: two seconds of slack for the renewing thread on a loaded machine.
    slots = RedisConcurrencyLimiter(redis_client, KEYS, lease_seconds=3.0)
    try:
        lease = slots.acquire([SlotItem("long", 1)]).lease
        assert lease is not None
        _first_expiry_passed(redis_client, "long")  # only renewals keep it now
        assert slots.in_use("long") == 1
        assert slots.acquire([SlotItem("long", 1)]).lease is None
        slots.release(lease)
        assert slots.in_use("long") == 0
    finally:
        slots.close()


HOLDER = """
import sys, time, redis
from modelport.tenancy.limits import SlotItem
from modelport.keyspace import Keyspace
from modelport.tenancy.limits.redis import RedisConcurrencyLimiter
slots = RedisConcurrencyLimiter(
    redis.Redis.from_url(sys.argv[1]), Keyspace("limits-test"), lease_seconds=3.0
)
assert slots.acquire([SlotItem("crash", 1)]).lease is not None
print("held", flush=True)
time.sleep(600)
"""


@pytest.mark.slow
def test_a_crashed_holders_slot_comes_back_when_its_lease_expires(
    redis_client: redis.Redis, redis_url: str
) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, redis_url], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held"
        slots = RedisConcurrencyLimiter(redis_client, KEYS, lease_seconds=1.0)
        try:
            # The live holder renews its lease (each second, with two of slack) past
            # the first expiry.
            _first_expiry_passed(redis_client, "crash")
            assert slots.acquire([SlotItem("crash", 1)]).lease is None
            holder.kill()  # no finally, no release: a crash
            holder.wait(timeout=10)
            deadline = time.monotonic() + 60
            lease = None
            while lease is None and time.monotonic() < deadline:
                lease = slots.acquire([SlotItem("crash", 1)]).lease
                time.sleep(0.05)
            assert lease is not None, "the crashed holder's slot never came back"
            slots.release(lease)
        finally:
            slots.close()
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(timeout=10)


def test_gate_admits_exactly_the_rate_under_threads(redis_client: redis.Redis) -> None:
    slots = RedisConcurrencyLimiter(redis_client, KEYS)
    gate = RedisGate(RedisRateLimiter(redis_client, KEYS), slots)
    try:
        # An hour's allowance: no unit comes back while a loaded machine fires them all.
        rate, slot = [RateItem("t", 50, period=3600)], [SlotItem("s", 1000)]
        results = fire_at_once(200, lambda: gate.admit(rate, 1, slot))
        admitted = [s.lease for d, s in results if d.allowed and s and s.lease]
        assert len(admitted) == 50
        assert all(s is None for d, s in results if not d.allowed)
        assert slots.in_use("s") == 50
        for lease in admitted:
            slots.release(lease)
        assert slots.in_use("s") == 0
    finally:
        slots.close()


def test_gate_decides_like_the_two_limiters(redis_client: redis.Redis) -> None:
    rates = RedisRateLimiter(redis_client, KEYS)
    slots = RedisConcurrencyLimiter(redis_client, KEYS)
    gate = RedisGate(rates, slots)
    try:
        rate, slot = [RateItem("r", 3, label="tenant acme")], [SlotItem("s", 1)]
        decision, first = gate.admit(rate, 1, slot)
        assert (decision.allowed, decision.remaining, decision.label) == (True, 2, "tenant acme")
        assert first is not None and first.lease is not None
        decision, full = gate.admit(rate, 1, slot)
        assert decision.allowed and full is not None and full.refused == slot[0]
        assert decision.remaining == 1  # the rate was charged before the slot refused
        slots.release(first.lease)
        decision, third = gate.admit(rate, 1, slot)
        assert third is not None and third.lease is not None
        decision, refused = gate.admit(rate, 1, slot)
        assert not decision.allowed and refused is None
        assert decision.retry_after > 0
        assert slots.in_use("s") == 1  # the rate refusal took no slot
        slots.release(third.lease)
        decision, only_slots = gate.admit([], 1, slot)
        assert decision.limit == 0 and only_slots is not None and only_slots.lease is not None
        slots.release(only_slots.lease)
    finally:
        slots.close()


def test_redis_errors_fail_closed() -> None:
    dead = redis.Redis(
        host="127.0.0.1", port=1, socket_connect_timeout=0.2, retry=Retry(NoBackoff(), 0)
    )
    with pytest.raises(Unavailable) as info:
        RedisRateLimiter(dead, KEYS).hit([RateItem("t", 1)])
    assert info.value.code == "limiter_unavailable"
    with pytest.raises(Unavailable):
        RedisConcurrencyLimiter(dead, KEYS, keep_alive=False).acquire([SlotItem("t", 1)])
