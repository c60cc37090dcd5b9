"""The distributed shape: the outbox drains into a Redis stream, a consumer group
records it in the ledger. Entries a dead consumer read but never acknowledged are
claimed by another (XAUTOCLAIM) and deduplicated by the ledger."""

from __future__ import annotations

import time

import orjson
import pytest
import redis

from modelport.app import build_keyspace
from modelport.metering.outbox import event_doc
from modelport.metering.stream import GROUP, RedisLedgerConsumer, RedisStreamSink
from tests.metering.conftest import KEYS, Metering, usage_event


class Crash(Exception):
    pass


class RecordThenCrash:
    """A ledger consumer's process that records, then dies before XACK."""

    def __init__(self, metering: Metering) -> None:
        self.metering = metering

    def record(self, events):
        self.metering.ledger.record(events)
        raise Crash


def consumer(client: redis.Redis, ledger, stream: str, name: str, idle_ms: int = 100):
    return RedisLedgerConsumer(
        client, ledger, KEYS, consumer=name, stream=stream, claim_idle_ms=idle_ms
    )


def test_outbox_to_stream_to_ledger(metering: Metering, stream: tuple[redis.Redis, str]) -> None:
    client, name = stream
    metering.outbox.put([usage_event(f"e{i}") for i in range(30)])
    assert metering.outbox.drain(RedisStreamSink(client, KEYS, stream=name), limit=7) == 30
    assert client.xlen(KEYS.name(name)) == 30
    reader = consumer(client, metering.ledger, name, "a")
    assert reader.consume_once() == 30
    assert metering.ledger.count() == 30
    assert client.xpending(KEYS.name(name), GROUP)["pending"] == 0
    assert reader.consume_once() == 0


def test_a_redelivered_outbox_batch_is_recorded_once(
    metering: Metering, stream: tuple[redis.Redis, str]
) -> None:
    client, name = stream
    sink = RedisStreamSink(client, KEYS, stream=name)
    events = [usage_event(f"e{i}") for i in range(5)]
    sink.deliver(events)  # a drainer delivered, then died before acknowledging...
    sink.deliver(events)  # ...so its rows were delivered again
    assert consumer(client, metering.ledger, name, "a").consume_once() == 10
    assert metering.ledger.count() == 5


def test_pending_entries_of_a_dead_consumer_are_claimed_and_deduplicated(
    metering: Metering, stream: tuple[redis.Redis, str]
) -> None:
    client, name = stream
    RedisStreamSink(client, KEYS, stream=name).deliver([usage_event(f"e{i}") for i in range(8)])
    dead = consumer(client, RecordThenCrash(metering), name, "dead")
    with pytest.raises(Crash):
        dead.consume_once()
    assert metering.ledger.count() == 8
    assert client.xpending(KEYS.name(name), GROUP)["pending"] == 8  # read, recorded, never acked
    early = consumer(client, metering.ledger, name, "survivor", idle_ms=10_000)
    assert early.consume_once() == 0  # within the dead consumer's idle time: left alone
    time.sleep(0.15)
    assert consumer(client, metering.ledger, name, "survivor", idle_ms=100).consume_once() == 8
    assert client.xpending(KEYS.name(name), GROUP)["pending"] == 0
    assert metering.ledger.count() == 8


def test_a_malformed_entry_does_not_block_the_group(
    metering: Metering, stream: tuple[redis.Redis, str]
) -> None:
    client, name = stream
    client.xadd(KEYS.name(name), {b"event": b"{not json"})
    RedisStreamSink(client, KEYS, stream=name).deliver([usage_event("good")])
    reader = consumer(client, metering.ledger, name, "a")
    assert reader.consume_once() == 1
    assert metering.ledger.get("good") is not None
    assert client.xpending(KEYS.name(name), GROUP)["pending"] == 0


def test_two_gateways_meter_through_the_stream_into_one_ledger(
    tmp_path, database_url: str, redis_url: str, stream: tuple[redis.Redis, str]
) -> None:
    """The distributed shape wired by the app: outbox → stream → consumer group → ledger,
    with a balance shared by both gateways."""
    from modelport.metering.types import BalanceScope
    from tests.metering.conftest import make_platform

    _, name = stream
    blobs = f"file://{tmp_path / 'blobs'}"
    shared = {
        "redis_url": redis_url,
        "metering_stream": name,
        "metering_delivery": "stream",  # auto would write the ledger directly on SQLite
        "blob_url": blobs,
    }
    first = make_platform(tmp_path / "one", database_url, **shared)
    second = make_platform(tmp_path / "two", database_url, seed=False, **shared)
    try:
        metering = first.services.metering
        metering.balances.credit(BalanceScope.TENANT, "beta", 3_000, tenant="beta")
        first.price(1_000)
        statuses = [gateway.infer(first.key).status_code for gateway in (first, second) * 2]
        assert statuses == [200, 200, 200, 402]
        first.services.metering.deliver()
        second.services.metering.deliver()
        events = [e.event for e in metering.ledger.entries()]
        assert len(events) == 3 and {e.amount_micros for e in events} == {1_000}
        assert (
            stream[0].xlen(build_keyspace(first.services.database).name(name)) == 3
        )  # they came through the stream
        assert all(e.reservation_id for e in events)
        balance = metering.balances.get(BalanceScope.TENANT, "beta")
        assert (balance.balance_micros, balance.reserved_micros) == (0, 0)
    finally:
        for gateway in (first, second):
            gateway.close_client()
            gateway.services.close()


@pytest.mark.parametrize(
    ("database", "delivery", "redis", "through_stream"),
    [
        ("sqlite", "auto", True, False),  # one machine (--workers): the ledger directly
        ("postgresql", "auto", True, True),  # the distributed shape
        ("postgresql", "auto", False, False),
        ("sqlite", "stream", True, True),
        ("postgresql", "ledger", True, False),
    ],
)
def test_where_usage_events_travel(
    tmp_path, database: str, delivery: str, redis: bool, through_stream: bool
) -> None:
    from modelport.config import Settings

    url = None if database == "sqlite" else "postgresql+psycopg://db/modelport"
    settings = Settings(
        home=tmp_path,
        database_url=url,
        redis_url="redis://cache:6379/0" if redis else None,
        metering_delivery=delivery,
    )
    assert settings.uses_usage_stream is through_stream


def test_stream_delivery_without_redis_is_refused(tmp_path) -> None:
    from modelport.app import build_services
    from modelport.config import Settings
    from modelport.errors import InvalidInput
    from tests.conftest import ADMIN_KEY

    settings = Settings(home=tmp_path, admin_key=ADMIN_KEY, metering_delivery="stream")
    with pytest.raises(InvalidInput, match="needs MODELPORT_REDIS_URL") as caught:
        build_services(settings)
    assert caught.value.code == "redis_required"


def test_a_group_lost_with_the_stream_is_made_again(
    metering: Metering, stream: tuple[redis.Redis, str]
) -> None:
    client, name = stream
    sink = RedisStreamSink(client, KEYS, stream=name)
    reader = consumer(client, metering.ledger, name, "a")
    sink.deliver([usage_event("before")])
    assert reader.consume_once() == 1
    client.delete(
        KEYS.name(name)
    )  # Redis lost the stream (a restart without persistence, a failover)
    sink.deliver([usage_event(f"after{i}") for i in range(3)])  # made again, with no group
    recorded = sum(reader.consume_once() for _ in range(2))  # the group is made again
    assert recorded == 3
    assert metering.ledger.count() == 4
    assert client.xpending(KEYS.name(name), GROUP)["pending"] == 0


def test_usage_left_in_the_stream_of_a_release_before_installation_ids_is_recorded(
    metering: Metering, stream: tuple[redis.Redis, str]
) -> None:
    """An upgrade: the old gateways stopped with events in the old stream (outside any
    keyspace), one batch read by an old consumer and never acknowledged, one never
    read. The new consumer records both, once, and then reads only its own stream."""
    client, name = stream
    legacy = f"legacy-{name}"
    try:
        events = [usage_event(f"old{i}") for i in range(6)]
        for event in events:
            client.xadd(legacy, {b"event": orjson.dumps(event_doc(event))})
        client.xgroup_create(legacy, GROUP, id="0")
        client.xreadgroup(GROUP, "old-gateway", {legacy: ">"}, count=2)  # read, then it stopped
        new = RedisLedgerConsumer(
            client, metering.ledger, KEYS, consumer="new", stream=name, legacy_stream=legacy
        )
        assert new.consume_once() == 6
        assert metering.ledger.count() == 6
        assert client.xpending(legacy, GROUP)["pending"] == 0
        client.xadd(legacy, {b"event": orjson.dumps(event_doc(usage_event("late")))})
        assert new.consume_once() == 0  # taken over once, at start
    finally:
        client.delete(legacy)
