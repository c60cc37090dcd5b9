"""The pool's in-process fixtures: a gateway and workers built as their roles build
them, on the real PostgreSQL and Redis, their periodic steps driven by hand."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
import redis
from fastapi.testclient import TestClient

from modelport.api.worker import create_worker_app
from modelport.app import WorkerServices, build_worker_services
from modelport.clock import ManualClock
from modelport.config import Role
from modelport.serving.pool.gateway import GatewayPool
from tests.conftest import free_port, skip_or_fail
from tests.databases import truncate_tables
from tests.metering import conftest as metering_fixtures
from tests.polling import eventually
from tests.serving.conftest import Serving, ServingFactory

redis_url = metering_fixtures.redis_url
TOKEN = "worker-token-" + "w" * 24


@dataclass
class Worker:
    client: TestClient
    services: WorkerServices

    @property
    def id(self) -> str:
        assert self.services.pool is not None
        return self.services.pool.agent.identity.id

    def step(self) -> None:
        """One heartbeat and one placement sync."""
        assert self.services.pool is not None
        agent = self.services.pool.agent
        agent.sync()
        agent.announce()


def reset_pool_keys(redis_url: str) -> None:
    """Forget another test's workers and scaling state."""
    client = redis.Redis.from_url(redis_url)
    for name in client.scan_iter("modelport:*:workers*"):
        client.delete(name)
    client.close()


@pytest.fixture
def gateway(make_serving: ServingFactory, postgres_url: str | None, redis_url: str) -> Serving:
    if postgres_url is None:
        skip_or_fail("the pool needs PostgreSQL (MODELPORT_TEST_DATABASE_URL)")
    assert postgres_url is not None
    truncate_tables(postgres_url)  # another test's placements and versions
    reset_pool_keys(redis_url)
    serving = make_serving(
        postgres_url,
        role=Role.GATEWAY,
        redis_url=redis_url,
        worker_token=TOKEN,
        worker_replicas=2,
    )
    serving.ensure_tenant("acme")
    return serving


@pytest.fixture
def start_worker(gateway: Serving) -> Iterator[Callable[[str], Worker]]:
    started: list[Worker] = []

    def start(name: str) -> Worker:
        settings = gateway.services.settings.model_copy(
            update={
                "role": Role.WORKER,
                "home": gateway.services.settings.store.home.parent / name,
                "worker_id": f"{name}-{uuid.uuid4().hex[:6]}",
                "grpc_port": free_port(),
                # The installation's blobs: the gateway's home's folder store.
                "blob_url": str(gateway.services.settings.store.home / "blobs"),
            }
        )
        services = build_worker_services(settings, clock=ManualClock())
        client = TestClient(create_worker_app(services))
        client.__enter__()
        worker = Worker(client, services)
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.client.__exit__(None, None, None)
        worker.services.close()


def pool_of(gateway: Serving) -> GatewayPool:
    placement = gateway.services.serving.controller.placement
    view = placement.view  # type: ignore[attr-defined]
    return GatewayPool(view, placement, None, None)  # type: ignore[arg-type]


def drive(gateway: Serving, workers: list[Worker], until: Callable[[], bool]) -> None:
    """Run every periodic step (workers' heartbeat and sync, the gateway's view and
    placer) until ``until`` holds."""
    pool = pool_of(gateway)

    def once() -> bool:
        for worker in workers:
            worker.step()
        pool.view.refresh()
        pool.placement.reconcile()
        return until()

    assert eventually(once, 60)
