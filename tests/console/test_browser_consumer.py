"""A consumer's jobs and invoices in a real browser (headless Chromium) against a live
server: a batch job's page shows its progress bar and follows the job by itself until
it succeeds, with links to its outputs; the invoice page shows its lines; a member
who may not set the budget is told so with the API's code."""

from __future__ import annotations

import io
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import numpy as np
import pytest

from modelport.metering.ledger import Ledger
from tests.conftest import ADMIN_KEY, LiveServer
from tests.console.conftest import MODEL, PRICE_MICROS, Console, seed
from tests.console.test_browser import browser, shot, sign_in
from tests.jobs.conftest import Jobs
from tests.metering.billing.factories import event, price
from tests.metering.conftest import make_platform

pytestmark = pytest.mark.slow
__all__ = ["browser"]  # the browser fixture, shared with test_browser.py

OCTOBER = datetime(2026, 10, 20, 9, 0, tzinfo=UTC)


@pytest.fixture
def quiet_live(tmp_path: Path, database_url: str) -> Iterator[tuple[Console, LiveServer]]:
    """The console's platform served live, with no job runner of its own: the test runs
    the queued jobs when it chooses."""
    platform = make_platform(tmp_path / "home", database_url, job_runner_concurrency=0)
    console = seed(platform)
    server = platform.live()
    try:
        yield console, server
    finally:
        server.stop()
        platform.services.close()


def submit_batch(console: Console, url: str) -> str:
    data = io.BytesIO()
    np.save(data, np.arange(100, dtype=np.float32).reshape(25, 4))
    file = console.services.files.create("beta", "user_data", "rows.npy", data.getvalue())
    pipeline = [
        {"name": "shards", "implementation": "tensor_shards", "params": {"shard_rows": 10}},
        {"name": "publish", "implementation": "tensor_publish"},
    ]
    response = httpx.post(
        f"{url}/api/jobs",
        json={"target": {"model": MODEL}, "input_digest": file.digest, "pipeline": pipeline},
        headers={"Authorization": f"Bearer {console.beta_key}"},
    )
    assert response.status_code == 202, response.text
    return str(response.json()["id"])


def test_a_jobs_progress_and_an_invoices_lines(
    quiet_live: tuple[Console, LiveServer], browser: object, tmp_path: Path
) -> None:
    console, server = quiet_live
    url = server.url
    job_id = submit_batch(console, url)
    context = browser.new_context(viewport={"width": 1280, "height": 900})  # type: ignore[attr-defined]
    page = context.new_page()
    sign_in(page, url, console.beta_key)

    page.get_by_role("link", name="Jobs").click()
    page.wait_for_url("**/console/jobs")
    assert "queued" in page.locator("#jobs").inner_text()
    shot(page, tmp_path, "jobs")
    page.get_by_role("link", name=job_id).click()
    page.wait_for_url(f"**/console/jobs/{job_id}")
    bar = page.get_by_label("Rows processed")
    assert bar.get_attribute("max") == "25" and bar.get_attribute("value") == "0"
    assert page.get_by_role("button", name="Cancel job").is_visible()

    # The job runs while the page is open: the page follows it without a reload.
    # (In a thread of its own: Playwright's loop runs in this one.)
    runner = threading.Thread(target=Jobs(console.platform).drain)
    runner.start()
    runner.join(timeout=60)
    page.locator("#job-state", has_text="succeeded").wait_for(timeout=60_000)
    assert page.get_by_label("Rows processed").get_attribute("value") == "25"
    assert "25 rows done, 0 failed, of 25 (100%)" in page.locator("#progress-text").inner_text()
    assert page.get_by_role("button", name="Cancel job").count() == 0
    assert page.get_by_role("link", name="shard 1 output").count() == 1
    assert page.locator("#job-announce").inner_text() == "Job succeeded"
    shot(page, tmp_path, "job")

    # October's invoice, generated and shown with its line.
    Ledger(console.services.database, now=lambda: OCTOBER).record(
        [event("beta", MODEL, "1", snapshot=price(PRICE_MICROS), at=OCTOBER) for _ in range(2)]
    )
    generated = httpx.post(
        f"{url}/api/billing/generate",
        json={"period": "2026-10"},
        headers={"Authorization": f"Bearer {ADMIN_KEY}"},
    )
    assert generated.status_code == 200, generated.text
    page.get_by_role("link", name="Invoices").click()
    page.wait_for_url("**/console/invoices")
    page.get_by_role("link", name="Invoice for 2026-10").click()
    page.wait_for_url("**/console/invoices/*")
    lines = page.locator("#invoice-lines").inner_text()
    assert MODEL in lines and "$0.005000" in lines and "prediction" in lines
    shot(page, tmp_path, "invoice")

    # Budget and limits: beta's member may read the budget, not set it; the page says so.
    page.get_by_role("link", name="Budget & limits").click()
    page.wait_for_url("**/console/limits")
    assert page.locator("#no-budget").is_visible()
    page.get_by_label("Hard cap (dollars a month)").fill("20")
    page.get_by_role("button", name="Save budget").click()
    assert "(forbidden)" in page.locator("#form-error").inner_text()
    shot(page, tmp_path, "limits")
    context.close()
