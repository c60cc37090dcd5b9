"""Limits fixtures: the real Redis (when configured), and a platform with tenants, keys
and a published model to call through ``/v2``."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis
from starlette.testclient import TestClient

from modelport.api import create_app
from modelport.app import Services, build_services
from modelport.config import Settings
from modelport.keyspace import Keyspace
from modelport.tenancy.limits import ScopeType
from tests.api_v2.conftest import Publisher
from tests.conftest import ADMIN_KEY, skip_or_fail
from tests.databases import migrated_sqlite

REDIS_ENV = "MODELPORT_TEST_REDIS_URL"
LIMITS_KEYS = "modelport:*:limits:*"  # of any installation
KEYS = Keyspace("limits-test")
"""The keyspace of the limiters tests build themselves."""
ADDER_BODY = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1, 2, 3, 4]}]}


def clear_limits_keys(client: redis.Redis) -> None:
    for key in client.scan_iter(LIMITS_KEYS, count=1000):
        client.delete(key)


@pytest.fixture
def redis_url() -> Iterator[str]:
    """The real Redis of MODELPORT_TEST_REDIS_URL, with no limits keys left over."""
    url = os.environ.get(REDIS_ENV)
    if not url:
        skip_or_fail(f"Redis tests need {REDIS_ENV} (e.g. redis://127.0.0.1:6379/0)")
    assert url is not None
    client = redis.Redis.from_url(url)
    try:
        client.ping()
    except redis.RedisError as exc:
        client.close()
        skip_or_fail(f"Redis at {REDIS_ENV} does not answer: {exc}")
    clear_limits_keys(client)
    yield url
    clear_limits_keys(client)
    client.close()


@pytest.fixture
def redis_client(redis_url: str) -> Iterator[redis.Redis]:
    """A client of the test Redis (room for many threads' connections)."""
    c = redis.Redis.from_url(redis_url, max_connections=256)
    yield c
    c.close()


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


@dataclass
class Platform:
    """A running app with the admin client; makes tenants, keys and limits for tests."""

    client: TestClient
    services: Services
    publisher: Publisher

    def tenant(self, slug: str, *members: tuple[str, list[str]]) -> dict[str, str]:
        """Create a tenant with members (name, roles); returns each member's key."""
        tenancy = self.services.tenancy
        tenancy.create_tenant(slug, actor="admin")
        keys = {}
        for name, roles in members:
            tenancy.add_member(slug, name, roles=roles, actor="admin")
            keys[name] = tenancy.create_key(slug, name, name="test", actor="admin").secret
        return keys

    def key_id(self, secret: str) -> str:
        return secret.removeprefix("mp_live_").split("_")[0]

    def limit(self, scope_type: ScopeType, scope_id: str, **values: Any) -> None:
        fields = {"rpm": None, "concurrency": None, "tpm": None, **values}
        self.services.limits.set_limits(scope_type, scope_id, tenant=None, actor="test", **fields)

    def infer(self, secret: str, model: str = "acme/adder", **kwargs: Any) -> Any:
        return self.client.post(
            f"/v2/models/{model}/infer", json=kwargs.pop("json", ADDER_BODY), headers=bearer(secret)
        )


PlatformFactory = Callable[..., Platform]


@pytest.fixture
def make_platform(tmp_path: Path) -> Iterator[PlatformFactory]:
    """Services on SQLite with settings a test chooses, behind an in-process client."""
    opened: list[tuple[TestClient, Services]] = []

    def factory(database_url: str | None = None, **overrides: Any) -> Platform:
        home = tmp_path / f"home{len(opened)}"
        url = database_url or migrated_sqlite(home / "modelport.db")
        settings = Settings(
            home=home,
            database_url=url,
            admin_key=ADMIN_KEY,
            auto_migrate=url.startswith("sqlite"),
            runtime_intra_op_threads=1,
            **overrides,
        )
        services = build_services(settings)
        client = TestClient(create_app(services), headers=bearer(ADMIN_KEY))
        client.__enter__()
        opened.append((client, services))
        return Platform(client, services, Publisher(client, services))

    yield factory
    for client, services in opened:
        client.__exit__(None, None, None)
        services.close()


@pytest.fixture
def platform(make_platform: PlatformFactory) -> Platform:
    return make_platform()
