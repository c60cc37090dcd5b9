"""Repository loads and unloads reach every process sharing the Redis.

Two applications in this test process over one SQLite home, each with its own model
host, stand for two gateways; they talk over the real Redis on a channel of the test's
own.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from modelport.api import create_app
from modelport.app import Services, build_repository_sync, build_services
from modelport.config import Settings
from modelport.keyspace import Keyspace
from modelport.runtime.admission import MemoryBudget
from modelport.runtime.types import LoadState
from modelport.serving.repository_sync import (
    Action,
    LocalRepositorySync,
    RedisRepositorySync,
    RepositoryChange,
    decode,
    encode,
)
from tests.api_v2.conftest import AUTH, Publisher
from tests.conftest import ADMIN_KEY
from tests.metering import conftest as metering_fixtures

redis_url = metering_fixtures.redis_url  # the real Redis; skips (or fails) without it


@dataclass
class Gateway:
    client: TestClient
    services: Services
    sync: RedisRepositorySync

    def ready(self, version: str, model: str = "acme/adder") -> bool:
        response = self.client.get(f"/v2/models/{model}/versions/{version}/ready")
        return response.status_code == 200

    def hosts(self, version: str, model: str = "acme/adder") -> bool:
        return self.services.host.find(model, version) is not None


def eventually(check: Callable[[], bool], timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.02)
    return False


@pytest.fixture
def keys() -> Keyspace:
    """An installation of this test's own."""
    return Keyspace(uuid.uuid4().hex)


@pytest.fixture
def gateways(
    tmp_path: Path, redis_url: str, keys: Keyspace
) -> Iterator[tuple[Gateway, Gateway, Publisher]]:
    """Two gateways on one home and one Redis channel; versions 1 to 3 of acme/adder."""
    settings = Settings(
        home=tmp_path / "home",
        admin_key=ADMIN_KEY,
        auto_migrate=True,
        runtime_intra_op_threads=1,
    )
    opened: list[Gateway] = []
    try:
        for _ in range(2):
            services = build_services(settings)
            services.repository_sync.close()
            sync = RedisRepositorySync(redis_url, keys)
            services.repository_sync = sync
            services.model_repository.sync = sync
            client = TestClient(create_app(services), headers=dict(AUTH))
            client.__enter__()  # the lifespan starts the subscriber
            opened.append(Gateway(client, services, sync))
        for gateway in opened:
            assert gateway.sync.wait_subscribed(60)
        a, b = opened
        publisher = Publisher(a.client, a.services)
        for version in ("1", "2", "3"):
            publisher.adder(version=version)
        yield a, b, publisher
    finally:
        for gateway in opened:
            gateway.client.__exit__(None, None, None)
            gateway.services.close()


@pytest.fixture
def outsider(redis_url: str, keys: Keyspace) -> Iterator[RedisRepositorySync]:
    """A third process's sync, to publish changes by hand."""
    sync = RedisRepositorySync(redis_url, keys)
    yield sync
    sync.close()


def change(
    action: Action, version: str, *, origin: str, model: str = "acme/adder"
) -> RepositoryChange:
    return RepositoryChange(action, model, version, origin=origin)


def test_load_and_unload_reach_the_other_gateway(gateways) -> None:
    a, b, _ = gateways
    assert not b.ready("1")
    loaded = a.client.post(
        "/v2/repository/models/acme/adder/load",
        json={"parameters": {"version": "1", "pinned": True}},
    )
    assert loaded.status_code == 200, loaded.text
    assert eventually(lambda: b.ready("1"))
    key = b.services.host.find("acme/adder", "1")
    assert key is not None
    status = b.services.host.status(key)
    assert status is not None and status.pinned  # pinned there too

    unloaded = a.client.post(
        "/v2/repository/models/acme/adder/unload", json={"parameters": {"version": "1"}}
    )
    assert unloaded.status_code == 200, unloaded.text
    assert eventually(lambda: not b.hosts("1"))
    assert not b.ready("1")


def test_the_default_version_reaches_the_other_gateway_by_its_number(gateways) -> None:
    a, b, _ = gateways
    loaded = a.client.post("/v2/repository/models/acme/adder/load")
    assert loaded.status_code == 200 and loaded.json()["version"] == "3"
    assert eventually(lambda: b.ready("3"))
    # Unloading every version of the model on A announces each one.
    assert a.client.post("/v2/repository/models/acme/adder/unload").status_code == 200
    assert eventually(lambda: not b.hosts("3"))


def test_an_unload_reaches_a_version_loaded_on_demand_by_the_other_gateway(gateways) -> None:
    """Only B ran (and so loaded) version 2: unloading it through A, which hosts
    nothing, still answers 200 and unloads it on B; so does unloading every version."""
    a, b, _ = gateways
    body = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1, 2, 3, 4]}]}
    for version in ("2", "3"):
        answer = b.client.post(f"/v2/models/acme/adder/versions/{version}/infer", json=body)
        assert answer.status_code == 200, answer.text
    assert not a.hosts("2") and not a.hosts("3")

    one = a.client.post(
        "/v2/repository/models/acme/adder/unload", json={"parameters": {"version": "2"}}
    )
    assert one.status_code == 200, one.text
    assert one.json() == {"unloaded": []}  # nothing here; B's copy goes too
    assert eventually(lambda: not b.hosts("2"))
    assert b.hosts("3")

    every = a.client.post("/v2/repository/models/acme/adder/unload")
    assert every.status_code == 200, every.text
    assert eventually(lambda: not b.hosts("3"))


def test_a_gateway_ignores_its_own_changes(gateways, outsider) -> None:
    a, b, _ = gateways
    a.sync.publish(change("load", "2", origin=a.sync.origin))
    assert eventually(lambda: b.ready("2"))
    # Changes arrive in order: once A has applied a later one, it has seen its own.
    outsider.publish(change("load", "3", origin=outsider.origin))
    assert eventually(lambda: a.ready("3"))
    assert not a.hosts("2")


def test_changes_apply_in_the_order_published(gateways, outsider) -> None:
    _, b, _ = gateways
    outsider.publish(change("load", "1", origin=outsider.origin))
    outsider.publish(change("unload", "1", origin=outsider.origin))
    outsider.publish(change("load", "2", origin=outsider.origin))
    assert eventually(lambda: b.ready("2"))
    assert not b.hosts("1")


def test_a_change_that_cannot_apply_is_logged_and_the_next_one_applies(
    gateways, outsider, caplog: pytest.LogCaptureFixture
) -> None:
    a, b, _ = gateways
    caplog.set_level(logging.WARNING)
    outsider.publish(change("load", "9", origin=outsider.origin, model="acme/ghost"))
    outsider.publish(change("unload", "2", origin=outsider.origin))  # not hosted: nothing
    outsider._client.publish(outsider.channel, b"not a change")
    assert eventually(lambda: "could not load acme/ghost:9" in caplog.text)
    assert eventually(lambda: "malformed repository change" in caplog.text)
    assert a.client.post(
        "/v2/repository/models/acme/adder/load", json={"parameters": {"version": "1"}}
    ).is_success
    assert eventually(lambda: b.ready("1"))


def test_a_load_that_fails_on_the_other_gateway_is_logged_with_its_cause(
    gateways, outsider, caplog: pytest.LogCaptureFixture
) -> None:
    _, b, _ = gateways
    caplog.set_level(logging.WARNING)
    b.services.host.budget = MemoryBudget(host_bytes=1)  # B cannot fit anything any more
    outsider.publish(change("load", "1", origin=outsider.origin))
    assert eventually(lambda: "could not load acme/adder:1" in caplog.text)
    assert "memory" in caplog.text
    assert not b.ready("1")


def test_the_subscriber_comes_back_after_losing_its_connection(gateways, outsider) -> None:
    a, b, _ = gateways
    for client in b.sync._client.client_list(_type="pubsub"):
        if client["name"] == b.sync.client_name:
            b.sync._client.client_kill_filter(_id=client["id"])
    assert eventually(lambda: not b.sync.subscribed)
    assert b.sync.wait_subscribed(60)  # it resubscribes by itself
    a.client.post("/v2/repository/models/acme/adder/load", json={"parameters": {"version": "2"}})
    assert eventually(lambda: b.ready("2"))


def test_an_unreachable_redis_does_not_fail_the_local_change() -> None:
    down = RedisRepositorySync("redis://127.0.0.1:1/0", Keyspace("down"))
    try:
        down.publish(change("unload", "1", origin=down.origin))  # logged, not raised
        down.start(lambda _: None)
        assert not down.wait_subscribed(0.3)
    finally:
        down.close()


def test_changes_round_trip_and_garbage_is_refused() -> None:
    sent = RepositoryChange("load", "acme/adder", "7", pinned=True, origin="h:1:ab")
    assert decode(encode(sent)) == sent
    every = RepositoryChange("unload", "acme/adder", None, origin="h:1:ab")
    assert decode(encode(every)) == every
    for bad in (
        b"[]",
        b'{"action": "load", "model": "acme/adder", "version": null}',  # unloads only
        b"{}",
        b'{"action": "delete", "model": "acme/adder", "version": "1"}',
        b'{"action": "load", "model": "adder", "version": "1"}',
        b'{"action": "load", "model": "acme/adder", "version": 1}',
        b'{"action": "load", "model": "acme/adder", "version": "1", "pinned": "yes"}',
        b"\xff",
    ):
        with pytest.raises(ValueError):
            decode(bad)


def test_without_redis_the_sync_is_local(tmp_path: Path) -> None:
    local = build_repository_sync(Settings(home=tmp_path), Keyspace("test"))
    assert isinstance(local, LocalRepositorySync)
    local.publish(change("load", "1", origin=local.origin))  # nobody to tell
    shared = build_repository_sync(
        Settings(home=tmp_path, redis_url="redis://127.0.0.1:1/0"), Keyspace("test")
    )
    try:
        assert isinstance(shared, RedisRepositorySync)
    finally:
        shared.close()
    assert LocalRepositorySync().origin != LocalRepositorySync().origin


def test_an_embedded_server_keeps_serving_the_repository_api(v2) -> None:
    client, services, publisher = v2
    assert isinstance(services.repository_sync, LocalRepositorySync)
    publisher.adder()
    assert client.post("/v2/repository/models/acme/adder/load").status_code == 200
    key = services.host.find("acme/adder", "1")
    assert key is not None
    status = services.host.status(key)
    assert status is not None and status.state is LoadState.READY
    assert client.post("/v2/repository/models/acme/adder/unload").status_code == 200
