"""The key cache and its invalidation: in-process, and across processes through Redis."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest

from modelport.changes import LocalChangeBus
from modelport.changes.redis import RedisChangeBus
from modelport.keyspace import Keyspace
from modelport.tenancy.invalidation import KeyInvalidation
from modelport.tenancy.keycache import KeyCache
from modelport.tenancy.repository import KeyCredential


def credential(key_id: str) -> KeyCredential:
    return KeyCredential(
        key_id=key_id,
        secret_hash="0" * 64,
        tenant="acme",
        member="m",
        kind="member",
        roles=frozenset({"consumer"}),
        scopes=None,
        expires_at=None,
        revoked=False,
    )


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_entries_expire_after_the_ttl() -> None:
    clock = Clock()
    cache = KeyCache(ttl=10, clock=clock)
    assert cache.put(credential("a"), cache.generation)
    clock.now = 9.9
    assert cache.get("a") is not None
    clock.now = 10.0
    assert cache.get("a") is None and len(cache) == 0


def test_an_eviction_during_a_read_keeps_the_stale_read_out() -> None:
    cache = KeyCache(ttl=60)
    generation = cache.generation  # a reader starts fetching "a" from the database...
    cache.evict(["a"])  # ... while "a" is revoked elsewhere
    assert not cache.put(credential("a"), generation)
    assert cache.get("a") is None
    assert cache.put(credential("a"), cache.generation)


def test_the_cache_is_bounded() -> None:
    cache = KeyCache(ttl=60, max_entries=3)
    for key_id in "abcde":
        cache.put(credential(key_id), cache.generation)
    assert len(cache) == 3 and cache.get("a") is None and cache.get("e") is not None


def test_local_invalidation_evicts_from_its_cache() -> None:
    cache = KeyCache(ttl=60)
    cache.put(credential("a"), cache.generation)
    cache.put(credential("b"), cache.generation)
    KeyInvalidation(cache, LocalChangeBus()).publish(["a"])
    assert cache.get("a") is None and cache.get("b") is not None


@pytest.fixture
def pair(redis_url: str) -> Iterator[tuple[KeyInvalidation, KeyInvalidation]]:
    keys = Keyspace(uuid.uuid4().hex)
    one = KeyInvalidation(KeyCache(ttl=60), RedisChangeBus(redis_url, keys))
    two = KeyInvalidation(KeyCache(ttl=60), RedisChangeBus(redis_url, keys))
    assert one.wait_subscribed(30) and two.wait_subscribed(30)
    yield one, two
    for side in (one, two):
        side.close()
        side.changes.close()


def eventually(check: object, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return True
        time.sleep(0.01)
    return False


def test_redis_invalidation_reaches_the_other_process(
    pair: tuple[KeyInvalidation, KeyInvalidation],
) -> None:
    one, two = pair
    for side in pair:
        side.cache.put(credential("a"), side.cache.generation)
        side.cache.put(credential("b"), side.cache.generation)
    one.publish(["a"])
    assert one.cache.get("a") is None  # at once, here
    assert eventually(lambda: two.cache.get("a") is None)
    assert two.cache.get("b") is not None
    assert one.can_cache() and two.can_cache()


def test_without_its_subscription_a_process_forgets_and_stops_caching(
    pair: tuple[KeyInvalidation, KeyInvalidation],
) -> None:
    one, _ = pair
    one.cache.put(credential("a"), one.cache.generation)
    # Drop the subscriber's connection from the server side, as a network failure would.
    bus = one.changes
    assert isinstance(bus, RedisChangeBus)
    for client in bus._client.client_list(_type="pubsub"):
        if client["name"] == bus.client_name:
            bus._client.client_kill_filter(_id=client["id"])
    assert eventually(lambda: one.cache.get("a") is None)
    # It resubscribes by itself.
    assert eventually(one.can_cache)


def test_an_unreachable_redis_means_no_caching() -> None:
    cache = KeyCache(ttl=60)
    down = KeyInvalidation(cache, RedisChangeBus("redis://127.0.0.1:1/0", Keyspace("down")))
    try:
        assert not down.wait_subscribed(0.5)
        assert not down.can_cache()
        down.publish(["a"])  # logged, not raised: the change is already committed
    finally:
        down.close()
        down.changes.close()
