"""The embedded limiters: exact under concurrency, GCRA refill and waits, all-or-nothing."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from modelport.tenancy.limits import (
    InProcessConcurrencyLimiter,
    InProcessRateLimiter,
    RateItem,
    SlotItem,
)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def fire_at_once(n: int, attempt) -> list:
    """Run ``attempt`` from n threads released together."""
    barrier = threading.Barrier(n)

    def one(_: int):
        barrier.wait()
        return attempt()

    with ThreadPoolExecutor(max_workers=n) as pool:
        return list(pool.map(one, range(n)))


def test_200_threads_against_50_an_hour_let_exactly_50_through() -> None:
    limiter = InProcessRateLimiter()
    # An hour's allowance: no unit comes back while a loaded machine fires them all.
    item = [RateItem("t", 50, period=3600)]
    results = fire_at_once(200, lambda: limiter.hit(item).allowed)
    assert results.count(True) == 50


def test_200_coroutines_against_50_an_hour_let_exactly_50_through() -> None:
    limiter = InProcessRateLimiter()
    # An hour's allowance: no unit comes back while a loaded machine fires them all.
    item = [RateItem("t", 50, period=3600)]

    async def attempt() -> bool:
        await asyncio.sleep(0)
        return limiter.hit(item).allowed

    async def main() -> list[bool]:
        return await asyncio.gather(*(attempt() for _ in range(200)))

    assert asyncio.run(main()).count(True) == 50


def test_remaining_reset_and_retry_after() -> None:
    clock = FakeClock()
    limiter = InProcessRateLimiter(clock)
    item = [RateItem("t", 60)]  # one unit per second
    first = limiter.hit(item)
    assert (first.allowed, first.limit, first.remaining) == (True, 60, 59)
    assert first.reset_after == pytest.approx(1.0)
    for _ in range(59):
        last = limiter.hit(item)
    assert (last.allowed, last.remaining) == (True, 0)
    assert last.reset_after == pytest.approx(60.0)
    refused = limiter.hit(item)
    assert not refused.allowed
    assert refused.retry_after == pytest.approx(1.0)
    clock.now += 0.5
    assert limiter.hit(item).retry_after == pytest.approx(0.5)
    clock.now += 0.5
    again = limiter.hit(item)
    assert again.allowed and again.remaining == 0
    clock.now += 30
    assert limiter.hit(item).remaining == 29


def test_all_or_nothing_across_buckets() -> None:
    clock = FakeClock()
    limiter = InProcessRateLimiter(clock)
    tenant, key = RateItem("tenant", 10, label="tenant acme"), RateItem("key", 2)
    assert limiter.hit([tenant, key]).allowed
    assert limiter.hit([tenant, key]).allowed
    refused = limiter.hit([tenant, key])
    assert not refused.allowed and refused.bucket == "key"
    # The refused call charged nothing: the tenant still has 8 left.
    decision = limiter.hit([tenant])
    assert decision.remaining == 7 and decision.label == "tenant acme"


def test_most_restrictive_bucket_is_reported() -> None:
    limiter = InProcessRateLimiter(FakeClock())
    decision = limiter.hit([RateItem("a", 100), RateItem("b", 5)])
    assert (decision.bucket, decision.limit, decision.remaining) == ("b", 5, 4)


def test_cost_charges_several_units_and_can_exceed_the_allowance() -> None:
    limiter = InProcessRateLimiter(FakeClock())
    tokens = [RateItem("tpm", 1000)]
    assert limiter.hit(tokens, cost=600).remaining == 400
    refused = limiter.hit(tokens, cost=500)
    assert not refused.allowed
    assert refused.retry_after == pytest.approx(6.0)  # 100 tokens at 1000 per minute
    assert limiter.hit(tokens, cost=400).allowed


def test_concurrency_limit_is_exact_under_threads() -> None:
    slots = InProcessConcurrencyLimiter()
    item = [SlotItem("t", 5)]
    results = fire_at_once(100, lambda: slots.acquire(item))
    leases = [r.lease for r in results if r.lease is not None]
    assert len(leases) == 5
    assert all(r.refused == item[0] for r in results if r.lease is None)
    assert slots.in_use("t") == 5
    for lease in leases:
        slots.release(lease)
    assert slots.in_use("t") == 0


def test_concurrency_release_is_idempotent_and_all_or_nothing() -> None:
    slots = InProcessConcurrencyLimiter()
    tenant, key = SlotItem("tenant", 2), SlotItem("key", 1)
    held = slots.acquire([tenant, key]).lease
    assert held is not None
    refused = slots.acquire([tenant, key])
    assert refused.lease is None and refused.refused == key
    assert slots.in_use("tenant") == 1  # the refusal took nothing
    other = slots.acquire([tenant]).lease
    assert other is not None
    slots.release(held)
    slots.release(held)  # a second release must not free the other holder's slot
    assert slots.in_use("tenant") == 1
    assert slots.acquire([tenant, key]).lease is not None
