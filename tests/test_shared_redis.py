"""Two installations sharing one Redis database: neither sees the other's state.

Each installation is its own database (a SQLite home) with the id its migration made;
two processes of one installation share that id, and with it their usage stream,
limit counters, key revocations and repository changes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from modelport.app import Services, build_services
from modelport.config import Settings
from modelport.errors import Unavailable
from modelport.keyspace import Keyspace
from modelport.serving.repository_sync import RepositoryChange
from modelport.store import create_database
from modelport.store.installation import installation_id
from modelport.tenancy.limits import RateItem, SlotItem
from tests.conftest import ADMIN_KEY
from tests.metering import conftest as metering_fixtures
from tests.metering.conftest import usage_event
from tests.polling import eventually
from tests.tenancy.test_keycache import credential

redis_url = metering_fixtures.redis_url  # the real Redis; skips (or fails) without it

Build = Callable[[str], Services]


@pytest.fixture
def build(tmp_path: Path, redis_url: str) -> Iterator[Build]:
    """``build(home)``: one process's services of the installation living in ``home``."""
    built: list[Services] = []

    def factory(home: str) -> Services:
        services = build_services(
            Settings(
                home=tmp_path / home,
                admin_key=ADMIN_KEY,
                redis_url=redis_url,
                metering_delivery="stream",  # auto writes the ledger directly on SQLite
                runtime_intra_op_threads=1,
            )
        )
        built.append(services)
        return services

    yield factory
    client = redis.Redis.from_url(redis_url)
    for services in built:
        prefix = Keyspace(installation_id(services.database)).prefix
        services.close()
        for key in client.scan_iter(prefix + "*"):
            client.delete(key)
    client.close()


def test_processes_of_one_installation_share_its_id_and_another_has_its_own(
    build: Build,
) -> None:
    first, again, other = build("a"), build("a"), build("b")
    ids = [installation_id(s.database) for s in (first, again, other)]
    assert ids[0] == ids[1] != ids[2]


def test_a_database_without_an_installation_id_refuses_to_start(tmp_path: Path) -> None:
    database = create_database(f"sqlite:///{tmp_path / 'empty.db'}")
    try:
        with pytest.raises(Unavailable) as caught:
            installation_id(database)
        assert caught.value.code == "installation_unknown"
    finally:
        database.dispose()


def test_usage_events_reach_only_their_own_installations_ledger(build: Build) -> None:
    a, b = build("a"), build("b")
    assert a.metering.consumer is not None and b.metering.consumer is not None
    a.metering.sink.deliver([usage_event(f"a{i}") for i in range(3)])
    b.metering.sink.deliver([usage_event("b0")])
    assert b.metering.consumer.consume_once() == 1  # its own event, not a's
    assert a.metering.consumer.consume_once() == 3
    assert a.metering.ledger.count() == 3 and a.metering.ledger.get("b0") is None
    assert b.metering.ledger.count() == 1 and b.metering.ledger.get("a0") is None


def test_limit_counters_are_counted_per_installation(build: Build) -> None:
    a, a_too, b = build("a"), build("a"), build("b")
    rate = [RateItem("tenant:acme", 1)]
    assert a.limits.rates.hit(rate).allowed
    assert not a_too.limits.rates.hit(rate).allowed  # one installation: one allowance
    assert b.limits.rates.hit(rate).allowed  # another: its own
    slot = [SlotItem("tenant:acme", 1)]
    held = a.limits.slots.acquire(slot).lease
    assert held is not None
    assert a_too.limits.slots.acquire(slot).lease is None
    other = b.limits.slots.acquire(slot).lease
    assert other is not None
    a.limits.slots.release(held)
    b.limits.slots.release(other)


def test_key_revocations_reach_only_their_own_installation(build: Build) -> None:
    a, a_too, b, b_too = build("a"), build("a"), build("b"), build("b")
    caches = {}
    for name, services in {"a": a, "a_too": a_too, "b": b, "b_too": b_too}.items():
        invalidation = services.tenancy.invalidation
        assert invalidation.wait_subscribed(30)  # type: ignore[attr-defined]
        caches[name] = cache = invalidation.cache  # type: ignore[attr-defined]
        for key_id in ("k1", "k2"):
            cache.put(credential(key_id), cache.generation)
    a.tenancy.invalidation.publish(["k1"])
    assert eventually(lambda: caches["a_too"].get("k1") is None)
    # b's own revocation, published after a's: once b has it, b would have had a's.
    b_too.tenancy.invalidation.publish(["k2"])
    assert eventually(lambda: caches["b"].get("k2") is None)
    assert caches["b"].get("k1") is not None


def test_repository_changes_reach_only_their_own_installation(build: Build) -> None:
    a, a_too, b, b_too = build("a"), build("a"), build("b"), build("b")
    seen: dict[str, list[RepositoryChange]] = {"a_too": [], "b": []}
    lock = threading.Lock()

    def recorder(name: str) -> Callable[[RepositoryChange], None]:
        def apply(change: RepositoryChange) -> None:
            with lock:
                seen[name].append(change)

        return apply

    for name, services in {"a_too": a_too, "b": b}.items():
        services.repository_sync.start(recorder(name))
        assert services.repository_sync.wait_subscribed(30)  # type: ignore[attr-defined]
    a.repository_sync.publish(
        RepositoryChange("load", "acme/adder", "1", origin=a.repository_sync.origin)
    )
    assert eventually(lambda: [c.origin for c in seen["a_too"]] == [a.repository_sync.origin])
    # b's own change, published after a's: once b has it, b would have had a's.
    b_too.repository_sync.publish(
        RepositoryChange("unload", "acme/adder", "2", origin=b_too.repository_sync.origin)
    )
    assert eventually(lambda: len(seen["b"]) >= 1)
    assert [c.origin for c in seen["b"]] == [b_too.repository_sync.origin]


def test_every_name_an_installation_writes_in_redis_is_under_its_id(
    build: Build, redis_url: str
) -> None:
    a = build("a")
    prefix = f"modelport:{installation_id(a.database)}:"
    client = redis.Redis.from_url(redis_url)
    try:
        before = set(client.scan_iter("*"))
        a.metering.sink.deliver([usage_event("e1")])
        assert a.metering.consumer is not None
        a.metering.consumer.consume_once()
        a.limits.rates.hit([RateItem("tenant:acme", 5)])
        lease = a.limits.slots.acquire([SlotItem("tenant:acme", 5)]).lease
        new = set(client.scan_iter("*")) - before
        assert new and all(key.decode().startswith(prefix) for key in new), new
        assert lease is not None
        a.limits.slots.release(lease)
    finally:
        client.close()


@pytest.mark.parametrize("bad", ["", "a:b", "a*", "x" * 65])
def test_an_id_that_could_reach_into_other_names_is_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        Keyspace(bad)
