"""The worker registry on the real Redis: leases expire by Redis's own TTL, a lapsed
worker leaves the live set (and the index), a withdrawn one leaves at once; the view
keeps its last read when Redis fails."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
import redis

from modelport.keyspace import Keyspace
from modelport.manifest import Manifest
from modelport.serving.pool.registry import RedisWorkerRegistry
from modelport.serving.pool.replicas import NoReadyReplica, PoolReplicas
from modelport.serving.pool.types import WorkerInfo
from modelport.serving.pool.view import PoolView
from modelport.serving.types import VersionRef
from tests.metering import conftest as metering_fixtures
from tests.polling import eventually

redis_url = metering_fixtures.redis_url


@pytest.fixture
def registry(redis_url: str) -> Iterator[RedisWorkerRegistry]:
    client = redis.Redis.from_url(redis_url)
    keys = Keyspace(uuid.uuid4().hex)
    yield RedisWorkerRegistry(client, keys)
    for name in client.scan_iter(f"{keys.prefix}*"):
        client.delete(name)
    client.close()


def manifest() -> Manifest:
    return Manifest.model_validate(
        {
            "format": "onnx",
            "files": [{"path": "m.onnx", "digest": "sha256:" + "1" * 64, "size": 1}],
            "inputs": [{"name": "x", "datatype": "FP32", "shape": [-1, 4]}],
            "outputs": [{"name": "y", "datatype": "FP32", "shape": [-1, 4]}],
            "license": "MIT",
        }
    )


def info(name: str, **versions: str) -> WorkerInfo:
    return WorkerInfo(
        id=name,
        address=f"127.0.0.1:{len(name)}",
        memory_bytes=1 << 30,
        formats=frozenset({"onnx"}),
        versions={k.replace("_", "/", 1) + ":1": v for k, v in versions.items()},
    )


def test_an_announced_worker_is_live_with_what_it_announced(
    registry: RedisWorkerRegistry,
) -> None:
    registry.announce(info("w1", acme_a="ready"), lease_seconds=30)
    registry.announce(info("w2"), lease_seconds=30)
    live = registry.live()
    assert [w.id for w in live] == ["w1", "w2"]
    assert live[0] == info("w1", acme_a="ready")
    ttl = registry.client.pttl(registry._record("w1"))
    assert 0 < ttl <= 30_000  # the lease is Redis's own


def test_a_lapsed_lease_takes_the_worker_out(registry: RedisWorkerRegistry) -> None:
    registry.announce(info("w1"), lease_seconds=30)
    registry.announce(info("w2"), lease_seconds=30)
    registry.client.pexpire(registry._record("w1"), 1)  # its heartbeats stopped
    assert eventually(lambda: [w.id for w in registry.live()] == ["w2"], 10)
    assert registry.client.smembers(registry._index) == {b"w2"}
    registry.announce(info("w1"), lease_seconds=30)  # a heartbeat brings it back
    assert [w.id for w in registry.live()] == ["w1", "w2"]


def test_a_withdrawn_worker_leaves_at_once(registry: RedisWorkerRegistry) -> None:
    registry.announce(info("w1"), lease_seconds=30)
    registry.withdraw("w1")
    assert registry.live() == []


def test_an_unreadable_record_is_ignored(registry: RedisWorkerRegistry) -> None:
    registry.announce(info("w1"), lease_seconds=30)
    registry.client.set(registry._record("bad"), b"{not json")
    registry.client.sadd(registry._index, "bad")
    assert [w.id for w in registry.live()] == ["w1"]


def test_the_view_lists_ready_replicas_and_keeps_its_last_read_on_failure(
    registry: RedisWorkerRegistry,
) -> None:
    view = PoolView(registry)
    changes: list[int] = []
    view.on_change(lambda: changes.append(1))
    registry.announce(info("w1", acme_a="ready"), lease_seconds=30)
    registry.announce(info("w2", acme_a="loading"), lease_seconds=30)
    view.refresh()
    assert view.fresh and changes == [1]
    assert [w.id for w in view.ready("acme/a:1")] == ["w1"]
    view.refresh()
    assert changes == [1]  # nothing changed: no listener called

    # A Redis that does not answer (nothing listens on port 1).
    view.registry = RedisWorkerRegistry(redis.Redis(port=1), registry.keys)
    with pytest.raises(redis.ConnectionError):
        view.refresh()
    assert [w.id for w in view.ready("acme/a:1")] == ["w1"]


def test_live_replicas_take_turns_and_follow_the_view(registry: RedisWorkerRegistry) -> None:
    view = PoolView(registry)
    version = VersionRef("acme/a", "1", "sha256:" + "0" * 64, manifest())
    replicas = PoolReplicas(view, lambda w: NoReadyReplica(w.id, frozenset(), frozenset()))
    live = replicas(version)
    assert replicas(version) is live  # one per version
    view.refresh()
    (alone,) = list(live)
    assert alone.name == "pool:acme/a:1"  # none ready: the refusing stand-in
    registry.announce(info("w1", acme_a="ready"), lease_seconds=30)
    registry.announce(info("w2", acme_a="ready"), lease_seconds=30)
    registry.announce(info("w3", acme_a="loading"), lease_seconds=30)
    view.refresh()
    firsts = [next(iter(live)).name for _ in range(4)]
    assert sorted(set(firsts)) == ["pool:w1", "pool:w2"]  # each ready one in turn
    assert len(list(live)) == 2  # never the one still loading


def test_the_pool_metrics_count_workers_ready_replicas_and_queues(
    registry: RedisWorkerRegistry,
) -> None:
    from prometheus_client import CollectorRegistry, generate_latest

    from modelport.serving.pool.metrics import PoolCollector

    view = PoolView(registry)
    scraped = CollectorRegistry()
    scraped.register(PoolCollector(view))
    registry.announce(
        WorkerInfo(id="w1", address="a:1", versions={"acme/a:1": "ready"}, queued={"acme/a:1": 3}),
        lease_seconds=30,
    )
    registry.announce(
        WorkerInfo(
            id="w2",
            address="a:2",
            versions={"acme/a:1": "ready", "acme/b:1": "loading"},
            queued={"acme/a:1": 2},
        ),
        lease_seconds=30,
    )
    view.refresh()
    page = generate_latest(scraped).decode()
    assert 'modelport_pool_workers{pool="default"} 2.0' in page
    assert 'modelport_pool_ready_replicas{version="acme/a:1"} 2.0' in page
    assert 'modelport_pool_ready_replicas{version="acme/b:1"}' not in page  # still loading
    assert 'modelport_pool_queued_requests{version="acme/a:1"} 5.0' in page
