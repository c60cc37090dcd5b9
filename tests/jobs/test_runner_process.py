"""A runner process killed with SIGKILL in the middle of a stage (its metered call
charged, the stage not yet recorded done): a second process resumes the job at that
stage once the lease expires, each stage's effect happens once (the infer stage's
model runs again, but its call is charged once), and the ledger equals a recompute."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from modelport.jobs.types import JobState
from modelport.metering.types import BalanceScope
from tests.conftest import ADMIN_KEY
from tests.jobs.conftest import INPUTS
from tests.jobs.runner_process import stages
from tests.metering.conftest import Platform, make_platform
from tests.serve_process import wait_for

ROOT = Path(__file__).resolve().parents[2]
LEASE = "2"


@pytest.fixture
def platform(tmp_path: Path, database_url: str) -> Iterator[Platform]:
    built = make_platform(
        tmp_path / "home", database_url, job_runner_concurrency=0, job_lease_seconds=2.0
    )
    yield built
    built.close_client()
    built.services.close()


def runner(platform: Platform, effects: Path, *, pause: bool) -> subprocess.Popen[bytes]:
    settings = platform.services.settings
    env = {k: v for k, v in os.environ.items() if not k.startswith("MODELPORT_")}
    env |= {
        "MODELPORT_HOME": str(settings.store.home),
        "MODELPORT_DATABASE_URL": settings.store.resolved_database_url,
        "MODELPORT_ADMIN_KEY": ADMIN_KEY,
        "MODELPORT_RUNTIME_EXECUTION": "manifest",  # threads, as the suite's (tests/conftest.py)
        "MODELPORT_RUNTIME_INTRA_OP_THREADS": "1",
        "MODELPORT_JOB_LEASE_SECONDS": LEASE,
        "MODELPORT_JOB_POLL_SECONDS": "0.1",
        "JOBS_TEST_EFFECTS": str(effects),
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)]),
    }
    if pause:
        env["JOBS_TEST_PAUSE"] = "1"
    return subprocess.Popen(
        [sys.executable, "-m", "tests.jobs.runner_process"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def lines(effects: Path) -> list[tuple[str, int]]:
    if not effects.exists():
        return []
    return [(w, int(p)) for w, p in (line.split() for line in effects.read_text().splitlines())]


@pytest.mark.slow
def test_a_killed_runner_process_is_resumed_by_another_and_charged_once(
    platform: Platform, tmp_path: Path
) -> None:
    services = platform.services
    services.metering.balances.credit(BalanceScope.TENANT, "beta", 10_000, tenant="beta")
    platform.price(2_500)
    for name, stage in stages().items():  # so that the submission names known stages
        services.jobs.stages.register(name, stage)
    pipeline = [
        {"name": "validate", "implementation": "effect-validate", "retryable": False},
        {"name": "infer", "implementation": "effect-infer"},
        {"name": "postprocess", "implementation": "effect-postprocess"},
    ]
    response = platform.client.post(
        "/api/jobs",
        json={"target": {"model": "acme/adder"}, "inputs": INPUTS, "pipeline": pipeline},
        headers={"Authorization": f"Bearer {platform.key}"},
    )
    assert response.status_code == 202, response.text
    job_id = response.json()["id"]
    effects = tmp_path / "effects.txt"

    first = runner(platform, effects, pause=True)
    try:
        wait_for(lambda: any(word == "paused" for word, _ in lines(effects)), seconds=120)
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    stalled = services.jobs.get(None, job_id)
    assert stalled.state is JobState.RUNNING and stalled.stage == 1

    second = runner(platform, effects, pause=False)
    try:
        wait_for(lambda: services.jobs.get(None, job_id).finished, seconds=120)
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait()
    done = services.jobs.get(None, job_id)
    assert done.state is JobState.SUCCEEDED, done
    assert [run.attempts for run in done.stages] == [1, 2, 1]

    noted = lines(effects)
    pids = {word: [pid for w, pid in noted if w == word] for word in ("validate", "postprocess")}
    assert pids["validate"] == [first.pid] and pids["postprocess"] == [second.pid]
    # The model ran in both processes; its call was charged once.
    assert [pid for w, pid in noted if w == "infer"] == [first.pid, second.pid]

    metering = services.metering
    if metering.journal is not None:
        assert metering.journal.flush()  # also applies the killed process's journal
    entries = platform.entries()
    assert [e.event.prediction_id for e in entries] == [f"job:{job_id}:infer"]
    assert [e.event.amount_micros for e in entries] == [2_500]
    balance = metering.balances.get(BalanceScope.TENANT, "beta")
    assert balance.balance_micros == 10_000 - 2_500 and balance.reserved_micros == 0
    period = entries[0].event.finished_at.strftime("%Y-%m")
    services.billing.generate(period)  # the invoice and statement, from the ledger
    [invoice] = services.billing.list_invoices(tenant="beta", period=period)
    assert invoice.total_micros == 2_500
    assert services.billing.recompute(period).clean
