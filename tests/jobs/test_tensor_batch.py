"""Tensor batches (``jobs.tensor_batch``): a ``.npy`` file of rows scored against
acme/adder shard by shard, each shard one metered call charged once, the outputs as
``.npy`` shards and a manifest; a runner process SIGKILLed in the middle of a batch of
100,000 rows is resumed by another with no finished shard redone."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from modelport.jobs.types import JobState
from modelport.metering.types import BalanceScope, Unit
from tests.conftest import ADMIN_KEY
from tests.jobs.conftest import Jobs
from tests.metering.conftest import Platform, make_platform
from tests.polling import eventually
from tests.serve_process import wait_for

ROOT = Path(__file__).resolve().parents[2]
PRICE = 3
CREDIT = 10_000_000
PIPELINE = [
    {"name": "shards", "implementation": "tensor_shards", "params": {"shard_rows": 0}},
    {"name": "publish", "implementation": "tensor_publish"},
]


def _npy(array: np.ndarray) -> bytes:
    out = io.BytesIO()
    np.save(out, array)
    return out.getvalue()


def _pipeline(shard_rows: int) -> list[dict[str, Any]]:
    return [
        {**PIPELINE[0], "params": {"shard_rows": shard_rows}},
        PIPELINE[1],
    ]


def _rows(n: int) -> np.ndarray:
    return np.arange(n * 4, dtype=np.float32).reshape(n, 4)


def _submit(platform: Platform, rows: np.ndarray, shard_rows: int) -> str:
    services = platform.services
    file = services.files.create("beta", "user_data", "rows.npy", _npy(rows))
    response = platform.client.post(
        "/api/jobs",
        json={
            "target": {"model": "acme/adder"},
            "input_digest": file.digest,
            "pipeline": _pipeline(shard_rows),
        },
        headers={"Authorization": f"Bearer {platform.key}"},
    )
    assert response.status_code == 202, response.text
    return str(response.json()["id"])


def _outputs(platform: Platform, job_id: str) -> tuple[dict[str, Any], np.ndarray]:
    services = platform.services
    manifest = services.jobs.output(services.jobs.get(None, job_id))
    assert manifest is not None
    parts = [
        np.load(io.BytesIO(services.blobs.get(shard["digest"])), allow_pickle=False)
        for shard in manifest["shards"]
    ]
    return manifest, np.concatenate(parts)


def _charged(platform: Platform, job_id: str) -> Counter[str]:
    entries = platform.entries()
    return Counter(
        e.event.prediction_id
        for e in entries
        if e.event.prediction_id.startswith(f"batch:{job_id}:")
    )


def test_a_tensor_batch_scores_every_row_shard_by_shard(jobs: Jobs) -> None:
    platform = jobs.platform
    services = platform.services
    services.metering.balances.credit(BalanceScope.TENANT, "beta", CREDIT, tenant="beta")
    platform.price(PRICE)
    rows = _rows(25)
    job_id = _submit(platform, rows, 10)
    jobs.drain()
    job = services.jobs.get(None, job_id)
    assert job.state is JobState.SUCCEEDED, job
    manifest, scored = _outputs(platform, job_id)
    assert manifest["rows"] == 25 and manifest["output"] == "y"
    assert [s["rows"] for s in manifest["shards"]] == [10, 10, 5]
    np.testing.assert_array_equal(scored, rows + 1)
    charged = _charged(platform, job_id)
    assert charged == Counter({f"batch:{job_id}:{i}": 1 for i in range(3)})

    shown = jobs.get(job_id).json()
    assert shown["progress"] == {
        "rows_total": 25,
        "rows_done": 25,
        "rows_failed": 0,
        "estimated_completion": None,
    }
    assert [s["digest"] for s in shown["manifest"]["shards"]] == [
        s["digest"] for s in manifest["shards"]
    ]
    rows_billed = sum(
        e.event.quantity
        for e in platform.entries()
        if e.event.prediction_id.startswith(f"batch:{job_id}:")
    )
    assert rows_billed == 3  # a prediction is a call: one per shard
    # A file that is not .npy fails the job at once.
    bad = services.files.create("beta", "user_data", "rows.txt", b"not numpy")
    response = platform.client.post(
        "/api/jobs",
        json={
            "target": {"model": "acme/adder"},
            "input_digest": bad.digest,
            "pipeline": _pipeline(10),
        },
        headers={"Authorization": f"Bearer {platform.key}"},
    )
    assert response.status_code == 202
    jobs.drain()
    failed = services.jobs.get(None, response.json()["id"])
    assert failed.state is JobState.FAILED and failed.error_code == "invalid_batch_file"

    # The /v1 batch stages run only the batches /v1/batches makes.
    response = platform.client.post(
        "/api/jobs",
        json={
            "target": {"model": "acme/adder"},
            "input_digest": bad.digest,
            "pipeline": [{"name": "lines", "implementation": "batch_shards"}],
        },
        headers={"Authorization": f"Bearer {platform.key}"},
    )
    jobs.drain()
    refused = services.jobs.get(None, response.json()["id"])
    assert refused.state is JobState.FAILED and refused.error_code == "invalid_job_input"


def test_a_tensor_batch_priced_per_row_charges_each_shard_for_its_rows(jobs: Jobs) -> None:
    platform = jobs.platform
    services = platform.services
    services.metering.balances.credit(BalanceScope.TENANT, "beta", 1_000, tenant="beta")
    platform.price(PRICE, unit="row")
    job_id = _submit(platform, _rows(25), 10)
    jobs.drain()
    assert services.jobs.get(None, job_id).state is JobState.SUCCEEDED
    charged = {
        e.event.prediction_id: (e.event.unit, e.event.quantity, e.event.amount_micros)
        for e in platform.entries()
        if e.event.prediction_id.startswith(f"batch:{job_id}:")
    }
    assert charged == {
        f"batch:{job_id}:0": (Unit.ROW, 10, 10 * PRICE),
        f"batch:{job_id}:1": (Unit.ROW, 10, 10 * PRICE),
        f"batch:{job_id}:2": (Unit.ROW, 5, 5 * PRICE),
    }
    balance = services.metering.balances.get(BalanceScope.TENANT, "beta")
    assert balance.balance_micros == 1_000 - 25 * PRICE and balance.reserved_micros == 0
    # A shard whose rows the balance left cannot hold is refused before it runs.
    short = _submit(platform, _rows(400), 400)
    jobs.drain()
    job = jobs.get(short).json()
    assert (job["state"], job["error"]["code"]) == ("failed", "budget_exceeded"), job
    assert not [e for e in platform.entries() if e.event.prediction_id.startswith(f"batch:{short}")]
    balance = services.metering.balances.get(BalanceScope.TENANT, "beta")
    assert balance.balance_micros == 1_000 - 25 * PRICE and balance.reserved_micros == 0


# ---- a runner process killed in the middle of a batch of 100,000 rows
ROWS, SHARD = 100_000, 1_000


@pytest.fixture
def platform(tmp_path: Path, database_url: str) -> Iterator[Platform]:
    built = make_platform(
        tmp_path / "home", database_url, job_runner_concurrency=0, job_lease_seconds=2.0
    )
    yield built
    built.close_client()
    built.services.close()


def _runner(platform: Platform, effects: Path) -> subprocess.Popen[bytes]:
    settings = platform.services.settings
    env = {k: v for k, v in os.environ.items() if not k.startswith("MODELPORT_")}
    env |= {
        "MODELPORT_HOME": str(settings.store.home),
        "MODELPORT_DATABASE_URL": settings.store.resolved_database_url,
        "MODELPORT_ADMIN_KEY": ADMIN_KEY,
        "MODELPORT_RUNTIME_EXECUTION": "manifest",  # threads, as the suite's (tests/conftest.py)
        "MODELPORT_RUNTIME_INTRA_OP_THREADS": "1",
        "MODELPORT_JOB_LEASE_SECONDS": "2",
        "MODELPORT_JOB_POLL_SECONDS": "0.1",
        "JOBS_TEST_EFFECTS": str(effects),
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)]),
    }
    return subprocess.Popen(
        [sys.executable, "-m", "tests.jobs.batch_runner_process"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _runs(effects: Path) -> list[tuple[int, int]]:
    """(shard position, pid) of each shard run noted."""
    if not effects.exists():
        return []
    found = []
    for line in effects.read_text().splitlines():
        parts = line.split()
        if len(parts) == 3:
            found.append((int(parts[1]), int(parts[2])))
    return found


@pytest.mark.slow
def test_a_killed_batch_process_is_resumed_with_no_shard_redone(
    platform: Platform, tmp_path: Path
) -> None:
    services = platform.services
    services.metering.balances.credit(BalanceScope.TENANT, "beta", CREDIT, tenant="beta")
    platform.price(PRICE)
    rows = _rows(ROWS)
    job_id = _submit(platform, rows, SHARD)
    effects = tmp_path / "effects.txt"
    shards = ROWS // SHARD

    first = _runner(platform, effects)
    try:
        wait_for(lambda: len(_runs(effects)) >= 10, seconds=120)
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    with services.database.transaction() as session:
        from modelport.jobs import shards as shard_store

        finished = {c.position for c in shard_store.checkpoints(session, job_id)}
    stalled = services.jobs.get(None, job_id)
    assert stalled.state is JobState.RUNNING, stalled
    assert 0 < len(finished) < shards
    shown = platform.client.get(
        f"/api/jobs/{job_id}", headers={"Authorization": f"Bearer {platform.key}"}
    ).json()["progress"]
    assert shown["rows_total"] == ROWS and shown["rows_done"] == len(finished) * SHARD
    assert shown["estimated_completion"] is not None

    second = _runner(platform, effects)
    try:
        wait_for(lambda: services.jobs.get(None, job_id).finished, seconds=300)
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait()
    done = services.jobs.get(None, job_id)
    assert done.state is JobState.SUCCEEDED, done

    runs = _runs(effects)
    by_second = [position for position, pid in runs if pid == second.pid]
    assert not finished & set(by_second), "the second process redid a finished shard"
    counts = Counter(position for position, _ in runs)
    assert set(counts) == set(range(shards))
    assert sum(n - 1 for n in counts.values()) <= 1  # only the shard cut by the kill ran twice

    manifest, scored = _outputs(platform, job_id)
    assert manifest["rows"] == ROWS and len(manifest["shards"]) == shards
    np.testing.assert_array_equal(scored, rows + 1)

    metering = services.metering
    if metering.journal is not None:
        assert metering.journal.flush()  # also applies the killed process's journal
    expected = Counter({f"batch:{job_id}:{i}": 1 for i in range(shards)})
    # The ledger is fed by the outbox and the journals: wait for it to hold every shard
    # (a charge lost, or made twice, never gets there).
    eventually(lambda: _charged(platform, job_id) == expected, 60)
    assert _charged(platform, job_id) == expected
    entries = [e for e in platform.entries() if e.event.prediction_id.startswith("batch:")]
    total = sum(e.event.amount_micros for e in entries)
    balance = metering.balances.get(BalanceScope.TENANT, "beta")
    assert balance.balance_micros == CREDIT - total and balance.reserved_micros == 0
    period = entries[0].event.finished_at.strftime("%Y-%m")
    services.billing.generate(period)
    assert services.billing.recompute(period).clean
