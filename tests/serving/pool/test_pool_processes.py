"""The pool as separate processes on the real PostgreSQL, Redis and an S3-compatible
server (moto): two gateways and three workers (``modelport serve --role ...``), two
models deployed with two replicas each, load through both gateways, one worker killed
with SIGKILL under it. No admitted call fails or is lost, none is billed twice, the
ledger equals its recompute, and the lost replicas are placed again and ready."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families

from modelport.keyspace import Keyspace
from modelport.metering.balances import BalanceRepository
from modelport.metering.ledger import Ledger
from modelport.metering.types import BalanceScope
from modelport.serving.pool.placements import PlacementRepository
from modelport.serving.pool.registry import RedisWorkerRegistry
from modelport.store import Database, create_database
from modelport.store.installation import installation_id
from tests.blobs.conftest import s3_bucket, s3_endpoint, s3_env  # noqa: F401 (fixtures)
from tests.conftest import ADMIN_KEY, free_port, skip_or_fail
from tests.databases import truncate_tables
from tests.metering.conftest import ADDER_BODY, approve, make_platform
from tests.metering.conftest import redis_url as redis_url
from tests.metering.conftest import stream as stream
from tests.serve_process import serve, wait_for, wait_healthy

pytestmark = [pytest.mark.slow, pytest.mark.heavy]  # starts real processes

PRICE = 1_000
CREDIT = 100_000_000
TOKEN = "pool-token-" + "t" * 24
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}
MODELS = ("acme/adder", "acme/adder2")
CALLS = 240


def attempts(url: str, backend: str, *, ok: bool) -> float:
    """A gateway's attempts on ``backend`` that succeeded (``ok``) or not, from its
    ``/metrics``."""
    text = httpx.get(f"{url}/metrics", headers=ADMIN).text
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "modelport_serving_attempts_total"
        and sample.labels.get("backend") == backend
        and (sample.labels.get("outcome") == "ok") == ok
    )


@pytest.fixture
def database(postgres_url: str | None) -> Iterator[Database]:
    if postgres_url is None:
        skip_or_fail("the pool needs PostgreSQL (MODELPORT_TEST_DATABASE_URL)")
    assert postgres_url is not None
    truncate_tables(postgres_url)
    db = create_database(postgres_url)
    yield db
    db.dispose()


def test_a_worker_killed_under_load_loses_no_call_and_bills_each_once(
    tmp_path: Path,
    postgres_url: str,
    database: Database,
    redis_url: str,
    stream: tuple[redis.Redis, str],
    s3_endpoint: str,  # noqa: F811
    s3_bucket: str,  # noqa: F811
) -> None:
    shared = {
        "MODELPORT_DATABASE_URL": postgres_url,
        "MODELPORT_REDIS_URL": redis_url,
        "MODELPORT_BLOB_URL": f"s3://{s3_bucket}/blobs",
        "MODELPORT_S3_ENDPOINT_URL": s3_endpoint,
        "MODELPORT_METERING_STREAM": stream[1],
        "MODELPORT_WORKER_TOKEN": TOKEN,
        "MODELPORT_WORKER_HEARTBEAT_SECONDS": "0.5",
        "MODELPORT_WORKER_LEASE_SECONDS": "2",
        "MODELPORT_SERVING_REFRESH_SECONDS": "1",
    }
    platform = make_platform(
        tmp_path / "seed",
        postgres_url,
        blob_url=shared["MODELPORT_BLOB_URL"],
        s3_endpoint_url=s3_endpoint,
    )
    public = {"owner": "acme", "name": "adder2", "license": "MIT", "visibility": "public"}
    assert platform.client.post("/api/models", json=public).status_code == 201
    platform.publisher.models.add("acme/adder2")
    platform.publisher.adder("acme/adder2")
    approve(platform.services, "acme", "adder2", "1")
    for model in MODELS:
        priced = platform.client.post(
            "/api/prices",
            json={"model": model, "unit": "prediction", "unit_price_micros": PRICE},
        )
        assert priced.status_code == 201, priced.text
    platform.services.metering.balances.credit(BalanceScope.TENANT, "beta", CREDIT, tenant="beta")
    key = platform.key
    platform.close_client()
    platform.services.close()

    procs: dict[str, subprocess.Popen[bytes]] = {}
    urls: dict[str, str] = {}
    try:
        for name in ("w1", "w2", "w3"):
            port = free_port()
            urls[name] = f"http://127.0.0.1:{port}"
            procs[name] = serve(
                tmp_path / name,
                port,
                MODELPORT_ROLE="worker",
                MODELPORT_WORKER_ID=name,
                MODELPORT_GRPC_PORT=str(free_port()),
                **shared,
            )
        for name in ("g1", "g2"):
            port = free_port()
            urls[name] = f"http://127.0.0.1:{port}"
            procs[name] = serve(tmp_path / name, port, MODELPORT_ROLE="gateway", **shared)
        for name, proc in procs.items():
            wait_healthy(urls[name], proc, 120)

        registry = RedisWorkerRegistry(
            redis.Redis.from_url(redis_url), Keyspace(installation_id(database))
        )
        wait_for(lambda: {w.id for w in registry.live()} == {"w1", "w2", "w3"})

        # Two endpoints, one per model, deployed through the first gateway.
        for model in MODELS:
            endpoint = model.split("/")[1]
            made = httpx.post(
                f"{urls['g1']}/api/endpoints",
                json={"name": endpoint, "tenant": "acme"},
                headers=ADMIN,
            )
            assert made.status_code == 201, made.text
            deployed = httpx.post(
                f"{urls['g1']}/api/endpoints/{endpoint}/deployments",
                json={
                    "versions": [{"model": model, "version": "1", "weight": 100}],
                    "resources": {"min_replicas": 2, "max_replicas": 2},
                },
                headers=ADMIN,
            )
            assert deployed.status_code == 202, deployed.text

        def replicas() -> dict[str, set[str]]:
            ready: dict[str, set[str]] = {f"{m}:1": set() for m in MODELS}
            for worker in registry.live():
                for ref in ready:
                    if worker.ready(ref):
                        ready[ref].add(worker.id)
            return ready

        wait_for(lambda: all(len(ids) == 2 for ids in replicas().values()), 120)
        before = replicas()
        # The worker holding the most replicas goes.
        victim = max(("w1", "w2", "w3"), key=lambda w: sum(w in ids for ids in before.values()))

        statuses: list[int] = []
        failures: list[str] = []
        lock = threading.Lock()
        killed = threading.Event()

        def call(n: int) -> None:
            gateway = urls["g1" if n % 2 else "g2"]
            model = MODELS[(n // 2) % 2]
            if n == CALLS // 3:
                os.kill(procs[victim].pid, signal.SIGKILL)
                killed.set()
            answer = httpx.post(
                f"{gateway}/v2/models/{model}/versions/1/infer",
                json=ADDER_BODY,
                headers={"Authorization": f"Bearer {key}", "X-Request-Id": f"call-{n}"},
                timeout=60,
            )
            with lock:
                statuses.append(answer.status_code)
                if answer.status_code != 200 or answer.json()["outputs"][0]["data"] != [
                    2.0,
                    3.0,
                    4.0,
                    5.0,
                ]:
                    failures.append(answer.text)

        # A warm-up call through each gateway, until both route to the pool.
        def answered(gateway: str) -> bool:
            return all(
                httpx.post(
                    f"{urls[gateway]}/v2/models/{m}/versions/1/infer",
                    json=ADDER_BODY,
                    headers=ADMIN,
                    timeout=30,
                ).status_code
                == 200
                for m in MODELS
            )

        wait_for(lambda: answered("g1") and answered("g2"))
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(call, range(CALLS)))
        assert killed.is_set()
        procs[victim].wait(timeout=30)
        assert failures == [] and statuses == [200] * CALLS
        # Calls did go to the killed worker and failed there: the failover was exercised.
        failed_there = sum(attempts(urls[g], f"worker:{victim}", ok=False) for g in ("g1", "g2"))
        assert failed_there >= 1

        # Billed once each: the ledger holds every call's event once, the balance
        # moved by exactly that, no hold is left, and the ledger equals its recompute.
        ledger = Ledger(database)
        wait_for(lambda: len(ledger.entries(tenant="beta", limit=10_000)) >= CALLS)
        time.sleep(1.0)  # a second copy of any event, were there one, would arrive by now
        entries = ledger.entries(tenant="beta", limit=10_000)
        assert sorted(e.event.request_id for e in entries) == sorted(
            f"call-{n}" for n in range(CALLS)
        )
        balance = BalanceRepository(database).get(BalanceScope.TENANT, "beta")
        assert (balance.balance_micros, balance.reserved_micros) == (CREDIT - CALLS * PRICE, 0)
        period = datetime.now(UTC).strftime("%Y-%m")
        generated = httpx.post(
            f"{urls['g1']}/api/billing/generate", json={"period": period}, headers=ADMIN
        )
        assert generated.status_code == 200, generated.text
        recompute = httpx.get(
            f"{urls['g1']}/api/billing/recompute", params={"period": period}, headers=ADMIN
        ).json()
        everything = ledger.entries(limit=10_000)  # the warm-up calls' too
        assert recompute["clean"] is True, recompute
        assert recompute["events"] == len(everything), recompute

        # The victim's replicas are placed again on the live workers, and ready.
        wait_for(lambda: victim not in {w.id for w in registry.live()})
        wait_for(lambda: all(len(ids) == 2 for ids in replicas().values()), 120)
        assert all(victim not in ids for ids in replicas().values())
        placed = PlacementRepository(database).all()
        assert victim not in {p.worker_id for p in placed}
        assert sorted(p.ref for p in placed) == sorted([f"{m}:1" for m in MODELS] * 2)
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in procs.values():
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
