"""The change bus: in process, and across processes through Redis pub/sub."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator

import pytest
import redis

from modelport.changes import (
    AliasMoved,
    Change,
    GrantChanged,
    KeysRevoked,
    LocalChangeBus,
    VersionPublished,
)
from modelport.changes.bus import Subscribers
from modelport.changes.redis import RedisChangeBus
from modelport.changes.types import TOPICS, Unreadable, decode, encode
from modelport.keyspace import Keyspace
from tests.metering import conftest as metering_fixtures
from tests.polling import eventually

redis_url = metering_fixtures.redis_url  # the real Redis; skips (or fails) without it

MOVED = AliasMoved("acme", "iris", "stable", "2")
GRANTED = GrantChanged("acme", "globex", None, given=True)


class Seen:
    """Records what a bus delivered, from any thread."""

    def __init__(self, bus: Subscribers) -> None:
        self.changes: list[Change] = []
        self.resets = 0
        self._lock = threading.Lock()
        # The reset handler goes first: the first registration starts the subscription,
        # whose start is itself a reset that would otherwise go unseen.
        bus.on_reset(self.reset)
        for kind in TOPICS.values():
            bus.subscribe(kind, self.add)

    def add(self, change: Change) -> None:
        with self._lock:
            self.changes.append(change)

    def reset(self) -> None:
        with self._lock:
            self.resets += 1


# ---- in process


def test_an_event_reaches_the_subscribers_of_its_kind_before_publish_returns() -> None:
    bus = LocalChangeBus()
    moved: list[AliasMoved] = []
    granted: list[GrantChanged] = []
    bus.subscribe(AliasMoved, moved.append)
    bus.subscribe(GrantChanged, granted.append)
    bus.publish(MOVED)
    assert (moved, granted) == ([MOVED], [])


def test_a_failing_subscriber_does_not_keep_the_event_from_the_others() -> None:
    bus = LocalChangeBus()
    seen: list[AliasMoved] = []

    def broken(change: AliasMoved) -> None:
        raise RuntimeError("broken cache")

    bus.subscribe(AliasMoved, broken)
    bus.subscribe(AliasMoved, seen.append)
    bus.publish(MOVED)  # does not raise
    assert seen == [MOVED]


def test_an_unsubscribed_handler_is_not_called_again() -> None:
    bus = LocalChangeBus()
    seen: list[AliasMoved] = []
    undo = bus.subscribe(AliasMoved, seen.append)
    bus.publish(MOVED)
    undo()
    bus.publish(MOVED)
    assert seen == [MOVED]


def test_the_wire_form_round_trips_and_refuses_what_does_not_fit() -> None:
    for change in (
        MOVED,
        GRANTED,
        AliasMoved("a", "b", "c", None),
        VersionPublished("a", "b", "1"),
        KeysRevoked(("k1", "k2")),
    ):
        assert decode(encode(change, "me")) == ("me", change)
    # A topic of a later release: nothing here caches what it names.
    assert decode(b'{"topic": "serving.new_thing", "origin": "x", "fields": {}}') == ("x", None)
    for bad in (
        b"not json",
        b"[1]",
        b'{"topic": "registry.alias_moved", "fields": {"owner": "a"}}',
        b'{"topic": "registry.alias_moved", "fields": '
        b'{"owner": "a", "name": "b", "alias": "c", "version": [1]}}',
        b'{"topic": "tenancy.keys_revoked", "fields": {"key_ids": [1]}}',
    ):
        with pytest.raises(Unreadable):
            decode(bad)


# ---- across processes


@pytest.fixture
def make_bus(redis_url: str) -> Iterator[Callable[[Keyspace], RedisChangeBus]]:
    made: list[RedisChangeBus] = []

    def factory(keys: Keyspace) -> RedisChangeBus:
        bus = RedisChangeBus(redis_url, keys)
        made.append(bus)
        return bus

    yield factory
    for bus in made:
        bus.close()


def test_an_event_reaches_every_process_of_the_installation_once(
    make_bus: Callable[[Keyspace], RedisChangeBus],
) -> None:
    keys = Keyspace(uuid.uuid4().hex)
    here, there = make_bus(keys), make_bus(keys)
    seen_here, seen_there = Seen(here), Seen(there)
    assert here.wait_live(30) and there.wait_live(30)
    here.publish(MOVED)
    assert seen_here.changes == [MOVED]  # at once, here
    assert eventually(lambda: seen_there.changes == [MOVED])
    there.publish(GRANTED)
    assert eventually(lambda: seen_here.changes == [MOVED, GRANTED])
    assert seen_there.changes == [MOVED, GRANTED]  # its own, once: not again from Redis


def test_another_installation_on_the_same_redis_sees_nothing(
    make_bus: Callable[[Keyspace], RedisChangeBus],
) -> None:
    installation_a = Keyspace(uuid.uuid4().hex)
    a, a_too = make_bus(installation_a), make_bus(installation_a)
    b = make_bus(Keyspace(uuid.uuid4().hex))
    seen_a_too, seen_b = Seen(a_too), Seen(b)
    assert a_too.wait_live(30) and b.wait_live(30)
    a.publish(MOVED)
    assert eventually(lambda: seen_a_too.changes == [MOVED])
    # b's own event, published after a's: once b has it, b would have had a's.
    b.publish(GRANTED)
    assert seen_b.changes == [GRANTED]
    assert seen_a_too.changes == [MOVED]


def test_a_lost_subscription_drops_every_cache_and_comes_back(
    make_bus: Callable[[Keyspace], RedisChangeBus], redis_url: str
) -> None:
    keys = Keyspace(uuid.uuid4().hex)
    here, there = make_bus(keys), make_bus(keys)
    seen = Seen(there)
    assert there.wait_live(30)
    resets = seen.resets  # one when the subscription started
    assert resets >= 1
    # Drop the subscriber's connection from the server side, as a network failure would:
    # whatever is published until it is back is never delivered, so everything goes.
    admin = redis.Redis.from_url(redis_url)
    try:
        for client in admin.client_list(_type="pubsub"):
            if client["name"] == there.client_name:
                admin.client_kill_filter(_id=client["id"])
    finally:
        admin.close()
    assert eventually(lambda: seen.resets > resets)
    assert eventually(lambda: there.wait_live(0.1))
    here.publish(MOVED)  # delivered again once resubscribed
    assert eventually(lambda: MOVED in seen.changes)


def test_an_unreadable_message_drops_every_cache(
    make_bus: Callable[[Keyspace], RedisChangeBus], redis_url: str
) -> None:
    bus = make_bus(Keyspace(uuid.uuid4().hex))
    seen = Seen(bus)
    assert bus.wait_live(30)
    resets = seen.resets
    publisher = redis.Redis.from_url(redis_url)
    try:
        publisher.publish(bus.channel, b"garbage")
    finally:
        publisher.close()
    assert eventually(lambda: seen.resets == resets + 1)
    assert seen.changes == []


def test_an_unreachable_redis_does_not_fail_the_publisher() -> None:
    bus = RedisChangeBus("redis://127.0.0.1:1/0", Keyspace("down"))
    seen = Seen(bus)
    try:
        bus.publish(MOVED)  # logged, not raised: the change is already committed
        assert seen.changes == [MOVED]  # this process's caches still hear of it
        assert not bus.wait_live(0.3)
    finally:
        bus.close()
