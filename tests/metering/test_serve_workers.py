"""``modelport serve --workers 2``: two processes on one socket answer calls, meter
each exactly once, and report their metrics together."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import psutil
import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families

from modelport.metering.balances import BalanceRepository
from modelport.metering.ledger import Ledger
from modelport.metering.types import BalanceScope
from modelport.store import Database
from tests.conftest import ADMIN_KEY, free_port
from tests.metering.conftest import ADDER_BODY, make_platform
from tests.serve_process import serve, wait_for, wait_healthy

pytestmark = [pytest.mark.slow, pytest.mark.heavy]  # starts real processes

PRICE = 1_000
CREDIT = 10_000_000


def _sample(url: str, name: str, **labels: str) -> float:
    """The sum of ``name``'s samples whose labels include ``labels``, from ``/metrics``."""
    text = httpx.get(f"{url}/metrics", headers={"Authorization": f"Bearer {ADMIN_KEY}"}).text
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name and labels.items() <= sample.labels.items()
    )


def _workers(proc: psutil.Process) -> list[psutil.Process]:
    return [p for p in proc.children(recursive=True) if "spawn_main" in " ".join(p.cmdline())]


def test_two_workers_serve_meter_once_and_report_together(
    tmp_path: Path,
    database_url: str,
    database: Database,
    redis_url: str,
    stream: tuple[redis.Redis, str],
) -> None:
    home = tmp_path / "home"
    platform = make_platform(home, database_url)
    platform.services.metering.balances.credit(BalanceScope.TENANT, "beta", CREDIT, tenant="beta")
    platform.price(PRICE)
    key = platform.key
    platform.close_client()
    platform.services.close()

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = serve(
        home,
        port,
        MODELPORT_DATABASE_URL=database_url,
        MODELPORT_REDIS_URL=redis_url,
        MODELPORT_METERING_STREAM=stream[1],
        MODELPORT_WORKERS="2",
    )
    calls = 0
    try:
        wait_healthy(url, server)
        assert len(_workers(psutil.Process(server.pid))) == 2

        def call(n: int) -> int:
            # A new connection each time, so the kernel hands calls to both workers.
            answer = httpx.post(
                f"{url}/v2/models/acme/adder/infer",
                json=ADDER_BODY,
                headers={"Authorization": f"Bearer {key}", "X-Request-Id": f"w-{n}"},
                timeout=60,
            )
            assert answer.status_code == 200, answer.text
            assert answer.json()["outputs"][0]["data"] == [2.0, 3.0, 4.0, 5.0]
            return 1

        # Each worker loads the version on its first call: two loads once both served.
        deadline = time.monotonic() + 60
        with ThreadPoolExecutor(8) as pool:
            while (
                _sample(url, "modelport_model_load_phase_duration_seconds_count", phase="load") < 2
            ):
                assert time.monotonic() < deadline, "one worker never served a call"
                calls += sum(pool.map(call, range(calls, calls + 16)))

        def served() -> float:
            return _sample(
                url, "modelport_inference_requests_total", model="acme/adder", outcome="success"
            )

        # Each worker hands its request counts to the shared files within half a second.
        wait_for(lambda: served() >= calls)
        time.sleep(0.6)  # a count too many, were there one, would show by now
        assert served() == float(calls)

        ledger, balances = Ledger(database), BalanceRepository(database)
        wait_for(lambda: len(ledger.entries()) >= calls)
        time.sleep(0.5)  # a second copy of any event, were there one, would arrive by now
        entries = ledger.entries()

        # One unload, taken by one worker, reaches both: no copy is left anywhere.
        admin = {"Authorization": f"Bearer {ADMIN_KEY}"}
        assert _sample(url, "modelport_model_memory_bytes", model="acme/adder") > 0
        unloaded = httpx.post(f"{url}/v2/repository/models/acme/adder/unload", headers=admin)
        assert unloaded.status_code == 200, unloaded.text
        wait_for(lambda: _sample(url, "modelport_model_memory_bytes", model="acme/adder") == 0)
        for _ in range(10):  # new connections, so both workers answer some
            ready = httpx.get(f"{url}/v2/models/acme/adder/versions/1/ready", headers=admin)
            assert ready.status_code == 503, ready.text
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert server.returncode == 0
    assert not list((home / "run").glob("metrics-*")), "the workers' metrics folder is removed"
    assert sorted(e.event.request_id for e in entries) == sorted(f"w-{n}" for n in range(calls))
    after = balances.get(BalanceScope.TENANT, "beta")
    assert (after.balance_micros, after.reserved_micros) == (CREDIT - calls * PRICE, 0)
