"""The pool's autoscaler on the real PostgreSQL and Redis, with in-process workers
(their steps and the gateway's driven by hand, time moved on the manual clock): a
version's replicas shrink when its queue is calm and grow when its predicted wait
passes the target, within its deployment's bounds; an idle version scales to zero,
and its next call loads it within the call's deadline, or is refused with 503
``cold_start`` and ``Retry-After`` when it cannot be ready in time."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import redis

from modelport.runtime.types import LoadState, VersionKey
from modelport.serving.pool.placements import PlacementRepository
from modelport.serving.pool.scaler import PoolScaler
from modelport.serving.types import VersionRef
from tests.polling import eventually
from tests.serving.conftest import ROW, Serving, add_constant
from tests.serving.pool.conftest import Worker, drive, pool_of

REF = "acme/plus-one:1"


def scaler_of(gateway: Serving) -> PoolScaler:
    """The gateway's autoscaler, its steps taken by the test alone (its loop, woken by
    the clock's moves, would race the test's own steps)."""
    pool = gateway.services.worker_pool
    assert pool is not None and pool.scaler is not None
    pool.scaler.stop()
    return pool.scaler


def placed_on(gateway: Serving) -> list[str]:
    return sorted(p.worker_id for p in PlacementRepository(gateway.services.database).all())


def deploy(gateway: Serving, workers: list[Worker], **resources: int) -> None:
    pool = pool_of(gateway)
    drive(gateway, workers, lambda: len(pool.view.workers) == len(workers))
    gateway.publish("acme/plus-one", "1", add_constant(1.0))
    gateway.endpoint("one")
    made = gateway.deploy("one", [(REF, 100)], wait=False, resources=resources)
    drive(gateway, workers, lambda: gateway.deployment("one", made["id"])["state"] == "active")


def routed(gateway: Serving) -> VersionRef:
    """The version the endpoint's route holds, once the route has it (the route table
    is rebuilt after the deployment turns active, not with it)."""
    table = gateway.services.serving.router.table

    def held() -> bool:
        route = table.find("one")
        return route is not None and len(route.versions) > 0

    assert eventually(held, 30), "the endpoint's route never held its version"
    route = table.find("one")
    assert route is not None
    return route.versions[0]


def answers(gateway: Serving) -> bool:
    response = gateway.predict("one")
    assert response.status_code == 200, response.text
    return bool(np.asarray(response.json()["outputs"]["y"]).tolist() == [[v + 1 for v in ROW[0]]])


def test_replicas_shrink_when_calm_and_grow_on_queue_wait(
    gateway: Serving, start_worker: Callable[[str], Worker]
) -> None:
    workers = [start_worker("w1"), start_worker("w2")]
    pool, scaler = pool_of(gateway), scaler_of(gateway)
    policy = scaler.policy
    deploy(gateway, workers, min_replicas=1, max_replicas=2)
    # It starts at the pool's two replicas (within 1..2).
    drive(gateway, workers, lambda: len(pool.view.ready(REF)) == 2)
    assert answers(gateway)

    # Calls wait for nothing: once calm for long enough, one replica goes.
    scaler.step()
    gateway.clock.advance(policy.scale_down_after_seconds)
    scaler.step()
    assert scaler.store.targets()[REF] == 1
    drive(gateway, workers, lambda: len(placed_on(gateway)) == 1 and
          len(pool.view.ready(REF)) == 1)  # fmt: skip
    assert answers(gateway)
    scaler.step()
    assert scaler.store.targets()[REF] == 1  # never below min_replicas while called

    # Its queue's predicted wait passes the target: one more, on the other worker.
    for worker in workers:
        assert worker.services.pool is not None
        worker.services.pool.agent.waits = lambda key: 2.0 if key.ref == REF else None
    drive(gateway, workers, lambda: [w.waits.get(REF) for w in pool.view.ready(REF)] == [2.0])
    metrics = gateway.client.get("/metrics").text
    assert f'modelport_pool_queue_wait_seconds{{version="{REF}"}} 2.0' in metrics
    # The gateway's degradation reads the same wait (it hosts nothing to predict from).
    degradation = gateway.services.inference.degradation
    assert degradation is not None
    placed = routed(gateway)
    assert degradation.waits.predicted_wait(placed) == 2.0
    assert f'modelport_pool_requests_total{{version="{REF}"}} 2.0' in metrics
    target = gateway.services.settings.pool.target_wait_seconds
    assert f"modelport_pool_target_wait_seconds {target}" in metrics
    scaler.step()
    assert scaler.store.targets()[REF] == 2
    drive(gateway, workers, lambda: len(pool.view.ready(REF)) == 2)
    assert placed_on(gateway) == sorted(w.id for w in workers)
    # Still waiting long, but at max_replicas: no third replica.
    scaler.step()
    assert scaler.store.targets()[REF] == 2


def test_an_idle_version_scales_to_zero_and_its_next_call_loads_it(
    gateway: Serving, start_worker: Callable[[str], Worker]
) -> None:
    worker = start_worker("w1")
    pool, scaler = pool_of(gateway), scaler_of(gateway)
    deploy(gateway, [worker], min_replicas=0, max_replicas=1)
    drive(gateway, [worker], lambda: len(pool.view.ready(REF)) == 1)
    assert answers(gateway)

    def to_zero() -> None:
        gateway.clock.advance(scaler.policy.idle_seconds)
        scaler.step()
        assert scaler.store.targets()[REF] == 0
        drive(gateway, [worker], lambda: placed_on(gateway) == [] and not pool.view.ready(REF))
        assert worker.services.host.status(VersionKey("acme/plus-one", "1", "")) is None

    to_zero()
    # The next call wakes it and waits while it is placed and loaded: then answered.
    with ThreadPoolExecutor(1) as calls:
        answer = calls.submit(gateway.predict, "one")
        drive(gateway, [worker], answer.done)
        response = answer.result()
    assert response.status_code == 200, response.text
    assert placed_on(gateway) == [worker.id]

    to_zero()
    # Nothing loads it this time (the worker is not driven): past the call's deadline,
    # 503 cold_start with Retry-After, and no half answer.
    with ThreadPoolExecutor(1) as calls:
        answer = calls.submit(gateway.predict, "one")
        assert eventually(lambda: scaler.store.targets().get(REF) == 1, 30)  # woken
        gateway.clock.advance(3600)
        refused = answer.result(timeout=60)
    assert refused.status_code == 503, refused.text
    assert refused.json()["code"] == "cold_start"
    retry_after = gateway.services.settings.pool.cold_start_retry_after_seconds
    assert refused.headers["Retry-After"] == str(round(retry_after))
    # Each call that waited on a cold start is counted by its outcome.
    metrics = gateway.client.get("/metrics").text
    for outcome in ("served", "refused"):
        line = f'modelport_pool_cold_starts_total{{outcome="{outcome}",version="{REF}"}} 1.0'
        assert line in metrics, outcome


def test_a_release_while_redis_is_away_raises_nothing(
    gateway: Serving, start_worker: Callable[[str], Worker]
) -> None:
    """Releasing a version (a rollout that retired it, a rollback) forgets its scaling
    state too: Redis away then must not fail the rollout past what it already did (the
    live deployment's controller may place it again at once: not asserted here)."""
    worker = start_worker("w1")
    deploy(gateway, [worker], min_replicas=1, max_replicas=1)
    assert placed_on(gateway) == [worker.id]
    placement = gateway.services.serving.controller.placement
    version = routed(gateway)
    store = placement.scale
    reachable, store.client = store.client, redis.Redis(port=1, socket_connect_timeout=1)
    try:
        placement.release(version)  # raised ConnectionError
    finally:
        store.client = reachable


def test_placing_a_version_scaled_to_zero_reads_no_redis_on_the_event_loop(
    gateway: Serving, start_worker: Callable[[str], Worker]
) -> None:
    """``place`` runs on the serving loop (a rollout, a restart's warm-up): whether a
    version is scaled to zero comes from the targets the placer last read, so Redis
    slow or away then neither holds up the loop nor fails the rollout."""
    worker = start_worker("w1")
    pool, scaler = pool_of(gateway), scaler_of(gateway)
    deploy(gateway, [worker], min_replicas=0, max_replicas=1)
    gateway.clock.advance(scaler.policy.idle_seconds)
    scaler.step()
    drive(gateway, [worker], lambda: placed_on(gateway) == [] and not pool.view.ready(REF))
    placement = gateway.services.serving.controller.placement
    version = routed(gateway)
    store = placement.scale
    reachable, store.client = store.client, redis.Redis(port=1, socket_connect_timeout=1)
    try:
        done = placement.place(version)
    finally:
        store.client = reachable
    assert done.done()
    status = done.result()
    assert status.state is LoadState.READY and "scaled to zero" in (status.warm_up or "")
