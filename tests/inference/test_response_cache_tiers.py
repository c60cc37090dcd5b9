"""The response cache's parts: the question's key, the memory tier's bound, the wire form,
the tenancy rule on two cache instances, and the Redis tier shared by two of them (a real
Redis: ``MODELPORT_TEST_REDIS_URL``)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import anyio
import numpy as np
import pytest
import redis

from modelport.inference.cache import (
    CacheFlags,
    MemoryTier,
    RedisTier,
    ResponseCache,
    TenantCacheFlags,
    question_digest,
)
from modelport.inference.cache.entry import Unreadable, answer, decode, encode
from modelport.keyspace import Keyspace
from modelport.metering.meter import for_call
from modelport.metering.types import FREE, CallInfo, Unit
from tests.conftest import skip_or_fail

X = {"x": np.arange(4, dtype=np.float32).reshape(1, 4)}
Y = {"y": np.arange(4, dtype=np.float32).reshape(1, 4) + 1}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def flags_of(declared: dict[str, CacheFlags]) -> TenantCacheFlags:
    return TenantCacheFlags(declared.get, ttl=3600)


# ---- the key
def test_the_key_changes_with_every_part_of_the_question() -> None:
    base = question_digest("sha256:a", X, {}, None)
    assert question_digest("sha256:a", {"x": X["x"].copy()}, {}, None) == base
    others = [
        question_digest("sha256:b", X, {}, None),
        question_digest("sha256:a", {"x": X["x"] + 1}, {}, None),
        question_digest("sha256:a", {"x": X["x"].astype(np.float64)}, {}, None),
        question_digest("sha256:a", {"x": X["x"].reshape(2, 2)}, {}, None),
        question_digest("sha256:a", {"z": X["x"]}, {}, None),
        question_digest("sha256:a", X, {"temperature": 0.5}, None),
        question_digest("sha256:a", X, {}, ("y",)),
    ]
    assert base not in others and len(set(others)) == len(others)
    # Parameters in another order are the same parameters.
    one = question_digest("sha256:a", X, {"a": 1, "b": 2}, None)
    assert one == question_digest("sha256:a", X, {"b": 2, "a": 1}, None)


def test_bytes_tensors_are_keyed_by_their_elements() -> None:
    words = np.array([b"ab", b"c"], dtype=object)
    split = np.array([b"a", b"bc"], dtype=object)
    assert question_digest("d", {"t": words}, {}, None) != question_digest(
        "d", {"t": split}, {}, None
    )


# ---- the memory tier
def test_the_memory_tier_is_bounded_by_bytes_dropping_the_least_recently_used() -> None:
    clock = Clock()
    tier = MemoryTier(max_bytes=64, ttl_seconds=60, clock=clock)
    one = answer({"y": np.zeros(4, np.float64)}, "t", clock())  # 32 bytes each
    assert one.nbytes == 32
    tier.put("a", one)
    tier.put("b", answer({"y": np.ones(4, np.float64)}, "t", clock()))
    assert tier.get("a") is not None  # now the most recently used
    tier.put("c", answer({"y": np.full(4, 2.0)}, "t", clock()))
    assert (tier.get("a") is not None, tier.get("b"), tier.get("c") is not None) == (
        True,
        None,
        True,
    )
    assert tier.size_bytes == 64 and len(tier) == 2
    too_big = answer({"y": np.zeros(9, np.float64)}, "t", clock())
    assert tier.put("d", too_big) is False and tier.get("d") is None
    assert len(tier) == 2


def test_a_memory_entry_expires_after_its_ttl() -> None:
    clock = Clock()
    tier = MemoryTier(max_bytes=1024, ttl_seconds=10, clock=clock)
    tier.put("a", answer(Y, "t", clock()))
    clock.now += 10
    assert tier.get("a") is not None
    clock.now += 0.5
    assert tier.get("a") is None and tier.size_bytes == 0


def test_cached_arrays_are_private_read_only_copies() -> None:
    source = np.zeros(4, np.float32)
    entry = answer({"y": source}, "t", 0.0)
    source[0] = 9
    assert entry.outputs["y"][0] == 0
    with pytest.raises(ValueError):
        entry.outputs["y"][0] = 1


# ---- the wire form
def test_the_wire_form_round_trips_numbers_and_bytes() -> None:
    outputs = {
        "y": np.arange(6, dtype=np.int64).reshape(2, 3),
        "label": np.array([b"cat", b""], dtype=object),
        "ok": np.array([True, False]),
    }
    back = decode(encode(answer(outputs, "acme", 12.5)))
    assert (back.tenant, back.stored_at) == ("acme", 12.5)
    np.testing.assert_array_equal(back.outputs["y"], outputs["y"])
    assert back.outputs["y"].dtype == np.int64
    assert back.outputs["label"].tolist() == [b"cat", b""]
    assert back.outputs["ok"].tolist() == [True, False]


@pytest.mark.parametrize("damage", [b"", b"\x05\x00\x00\x00{", b"junk-junk-junk"])
def test_damaged_bytes_are_unreadable(damage: bytes) -> None:
    with pytest.raises(Unreadable):
        decode(damage)


def test_a_truncated_answer_is_unreadable() -> None:
    data = encode(answer(Y, "acme", 1.0))
    with pytest.raises(Unreadable):
        decode(data[:-1])
    with pytest.raises(Unreadable):
        decode(data + b"x")


# ---- the tenancy rule, in one process
def lookup(cache: ResponseCache, tenant: str | None, x: dict[str, Any] = X) -> Any:
    async def run() -> Any:
        return await cache.lookup(tenant, tenant or "admin", "sha256:v", x, {}, None)

    return anyio.run(run)


def store(cache: ResponseCache, found: Any) -> None:
    anyio.run(cache.store, found, Y)


def test_the_rule_between_tenants() -> None:
    declared = {
        "a": CacheFlags(shared_cache=True),
        "b": CacheFlags(shared_cache=True),
        "c": CacheFlags(),
        "n": CacheFlags(no_cache=True, shared_cache=True),
    }
    cache = ResponseCache(MemoryTier(max_bytes=1 << 20, ttl_seconds=60), flags_of(declared))
    assert lookup(cache, "n") is None  # no-cache: not even a key
    first = lookup(cache, "a")
    assert first.hit is None
    store(cache, first)
    assert lookup(cache, "b").hit is not None  # both share
    assert lookup(cache, "c").hit is None  # c does not share
    assert lookup(cache, None).hit is None  # nor does a principal of no tenant
    own = lookup(cache, "c")
    store(cache, own)
    assert lookup(cache, "c").hit.tenant == "c"
    assert lookup(cache, "a").hit.tenant == "a"  # c's answer stays c's


def test_a_big_answer_is_answered_but_not_kept() -> None:
    cache = ResponseCache(
        MemoryTier(max_bytes=1 << 20, ttl_seconds=60), flags_of({}), max_entry_bytes=8
    )
    found = lookup(cache, "a")
    store(cache, found)
    assert len(cache.memory) == 0


def test_flags_are_read_once_until_forgotten() -> None:
    reads: list[str] = []
    declared = {"a": CacheFlags()}

    def load(tenant: str) -> CacheFlags | None:
        reads.append(tenant)
        return declared.get(tenant)

    flags = TenantCacheFlags(load, ttl=3600)
    assert anyio.run(flags.of, "a") == CacheFlags()
    assert anyio.run(flags.of, "a") == CacheFlags()
    assert reads == ["a"]
    declared["a"] = CacheFlags(no_cache=True)
    flags.forget("a")
    assert anyio.run(flags.of, "a").no_cache is True
    assert anyio.run(flags.of, "unknown") == CacheFlags()  # not a tenant: the defaults
    assert anyio.run(flags.of, None) == CacheFlags()
    assert reads == ["a", "a", "unknown"]


# ---- metering
def test_a_cache_hit_rule_prices_hits_alone_and_never_a_call_that_ran() -> None:
    hit_price = FREE  # any snapshot: only which units apply is checked here
    prices = {Unit.PREDICTION: FREE, Unit.COMPUTE_MS: FREE, Unit.CACHE_HIT: hit_price}
    ran = CallInfo(tenant="t", key_id=None, model="m", version="1", manifest_digest="d")
    hit = CallInfo(
        tenant="t", key_id=None, model="m", version="1", manifest_digest="d", cached=True
    )
    assert set(for_call(prices, ran)) == {Unit.PREDICTION, Unit.COMPUTE_MS}
    assert set(for_call(prices, hit)) == {Unit.CACHE_HIT}
    plain = {Unit.PREDICTION: FREE}
    assert for_call(plain, hit) == plain  # no cache_hit rule: priced as any call


# ---- the Redis tier
@pytest.fixture
def redis_url() -> str:
    url = os.environ.get("MODELPORT_TEST_REDIS_URL")
    if not url:
        skip_or_fail("Redis tests need MODELPORT_TEST_REDIS_URL")
    assert url is not None
    return url


@pytest.fixture
def redis_client(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


def test_two_caches_share_answers_through_redis(redis_url: str, redis_client: redis.Redis) -> None:
    keys = Keyspace(f"rc{uuid.uuid4().hex[:12]}")

    def instance() -> ResponseCache:
        client = redis.Redis.from_url(redis_url)
        return ResponseCache(
            MemoryTier(max_bytes=1 << 20, ttl_seconds=60),
            flags_of({}),
            redis=RedisTier(client, keys, ttl_seconds=60),
        )

    one, two = instance(), instance()
    try:
        found = lookup(one, "a")
        assert found.hit is None
        store(one, found)
        other = lookup(two, "a")  # another process: not in its memory, in Redis
        assert other.hit is not None and other.hit.tenant == "a"
        np.testing.assert_array_equal(other.hit.outputs["y"], Y["y"])
        assert len(two.memory) == 1  # kept in its memory from then on
        assert lookup(two, "b").hit is None  # still b's own scope
        stored = list(redis_client.scan_iter(f"{keys.prefix}respcache:*"))
        assert len(stored) == 1
        ttl = redis_client.pttl(stored[0])
        assert 0 < ttl <= 60_000
        # Another installation on the same Redis never sees it.
        foreign = ResponseCache(
            MemoryTier(max_bytes=1 << 20, ttl_seconds=60),
            flags_of({}),
            redis=RedisTier(redis.Redis.from_url(redis_url), Keyspace("another"), ttl_seconds=60),
        )
        assert lookup(foreign, "a").hit is None
        foreign.close()
    finally:
        for name in redis_client.scan_iter(f"{keys.prefix}*"):
            redis_client.delete(name)
        one.close()
        two.close()


def test_an_unreadable_redis_value_is_a_miss(redis_client: redis.Redis) -> None:
    keys = Keyspace(f"rc{uuid.uuid4().hex[:12]}")
    tier = RedisTier(redis_client, keys, ttl_seconds=60)
    try:
        redis_client.set(tier.name("k"), b"not an answer")
        assert tier.get("k") is None
    finally:
        redis_client.delete(tier.name("k"))


def test_a_redis_that_does_not_answer_is_a_miss_not_a_failed_call() -> None:
    client = redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.2)
    cache = ResponseCache(
        MemoryTier(max_bytes=1 << 20, ttl_seconds=60),
        flags_of({}),
        redis=RedisTier(client, Keyspace("down"), ttl_seconds=60),
    )
    found = lookup(cache, "a")
    assert found.hit is None
    store(cache, found)  # kept in memory, not shared: no error
    assert lookup(cache, "a").hit is not None
    cache.close()
