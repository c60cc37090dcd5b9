"""A consumer's invoices, budget and limits, and jobs in the console, over the real app:
each page shows what the signed-in key may read through the API, forms change only
what the API lets that key change, and another tenant's invoice or job is the API's
404 by URL, never its data."""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from starlette.testclient import TestClient

from modelport.console import jobs_pages
from modelport.errors import NotFound
from modelport.metering.ledger import Ledger
from tests.conftest import ADMIN_KEY
from tests.console.conftest import (
    MODEL,
    PRICE_MICROS,
    Console,
    browser_client,
    csrf_of,
    seed,
    sign_in,
)
from tests.jobs.conftest import Jobs
from tests.metering.billing.factories import event, price
from tests.metering.conftest import make_platform

OCTOBER = datetime(2026, 10, 20, 9, 0, tzinfo=UTC)
"""A closed month: its invoice may be finalised and credited."""


def signed_in(console: Console, key: str) -> TestClient:
    client = browser_client(console)
    sign_in(client, key)
    return client


def member_key(console: Console, tenant: str, member: str, roles: list[str]) -> str:
    tenancy = console.services.tenancy
    tenancy.add_member(tenant, member, roles=roles, actor="admin")
    return str(tenancy.create_key(tenant, member, name=member, actor="admin").secret)


def caps(console: Console) -> tuple[int | None, int | None] | None:
    """beta's budget caps as stored (None: no budget)."""
    try:
        budget = console.services.limits.get_budget("beta")
    except NotFound:
        return None
    return budget.hard_cap_micros, budget.soft_cap_micros


def table(html: str, table_id: str) -> str:
    found = re.search(rf'<table id="{table_id}">(.*?)</table>', html, re.S)
    assert found, f"no table {table_id}"
    return found[1]


# ---- usage by key


def test_usage_plots_spend_by_key(console: Console) -> None:
    other = member_key(console, "beta", "bob", ["consumer", "billing"])
    other_id = other.split("_")[2]
    for key in (console.beta_key, console.beta_key, other):
        assert console.platform.infer(key, model=MODEL).status_code == 200
    console.platform.entries()
    page = signed_in(console, console.beta_key).get("/console/usage").text
    assert page.count('<svg class="chart"') == 3 and "Spend by key" in page
    key_chart = page[page.index('id="chart-key-t"') :]
    key_chart = key_chart[: key_chart.index("</svg>")]
    # ana's own key by its name; bob's, which ana may not list, by its id
    assert f"<title>laptop ({console.beta_key_id}): $0.005000</title>" in key_chart
    assert f"<title>{other_id}: $0.002500</title>" in key_chart
    assert f"<td>laptop</td><td><code>{console.beta_key_id}</code></td><td>2</td>" in page


# ---- invoices


@pytest.fixture
def october_invoice(console: Console) -> int:
    """beta's October invoice: two calls of acme/summer, finalised, then 1,000 micros
    given back by a credit note on its one line."""
    Ledger(console.services.database, now=lambda: OCTOBER).record(
        [
            event("beta", MODEL, "1", snapshot=price(PRICE_MICROS), at=OCTOBER),
            event("beta", MODEL, "1", snapshot=price(PRICE_MICROS), at=OCTOBER),
        ]
    )
    admin = console.platform.client
    generated = admin.post("/api/billing/generate", json={"period": "2026-10"})
    assert generated.status_code == 200, generated.text
    [invoice] = [i for i in generated.json()["invoices"] if i["tenant"] == "beta"]
    assert admin.post(f"/api/invoices/{invoice['id']}/finalize").status_code == 200
    note = admin.post(
        f"/api/invoices/{invoice['id']}/credit-notes",
        json={
            "reason": "slow week",
            "lines": [{"description": "goodwill", "amount_micros": 1_000, "invoice_line": 1}],
        },
    )
    assert note.status_code == 201, note.text
    return int(invoice["id"])


def test_invoices_list_and_show_lines_credit_notes_and_totals(
    console: Console, october_invoice: int
) -> None:
    client = signed_in(console, console.beta_key)
    listed = client.get("/console/invoices")
    assert listed.status_code == 200, listed.text
    rows = table(listed.text, "invoices")
    assert f'href="/console/invoices/{october_invoice}"' in rows
    assert re.search(
        r">2026-10</a></td>\s*<td>finalized</td>\s*<td>2</td>\s*<td>\$0\.005000</td>"
        r"\s*<td>\$0\.001000</td>\s*<td>\$0\.004000</td>",
        rows,
    ), rows
    shown = client.get(f"/console/invoices/{october_invoice}")
    assert shown.status_code == 200, shown.text
    lines = table(shown.text, "invoice-lines")
    assert (
        f"<td>1</td><td>{MODEL}</td><td>1</td><td>prediction</td><td>$0.002500</td>"
        "<td>1</td><td>2</td><td>2</td><td>$0.005000</td>"
    ) in lines
    assert '<dd id="due">$0.004000</dd>' in shown.text
    assert "slow week" in shown.text and "<td>goodwill</td><td>1</td><td>$0.001000</td>" in (
        shown.text
    )


def test_another_tenant_or_a_member_without_billing_gets_no_invoice(
    console: Console, october_invoice: int
) -> None:
    gamma = signed_in(console, console.gamma_key)
    assert "No invoices yet" in gamma.get("/console/invoices").text
    theirs = gamma.get(f"/console/invoices/{october_invoice}")
    assert theirs.status_code == 404 and "invoice_not_found" in theirs.text
    assert MODEL not in theirs.text and "$0.005000" not in theirs.text
    bad = gamma.get("/console/invoices/nope")
    assert bad.status_code == 400 and 'role="alert"' in bad.text
    consumer_only = signed_in(console, console.platform.key)  # beta's member "app"
    refused = consumer_only.get("/console/invoices")
    assert refused.status_code == 403 and "(forbidden)" in refused.text
    assert consumer_only.get(f"/console/invoices/{october_invoice}").status_code == 403


# ---- budget and limits


def test_budget_and_limits_are_shown_with_this_months_spend(console: Console) -> None:
    admin = console.platform.client
    assert admin.put("/api/budgets/beta", json={"hard_cap_micros": 4_000_000}).status_code == 200
    assert admin.put("/api/limits/tenant/beta", json={"rpm": 120, "jobs": 3}).status_code == 200
    assert console.platform.infer(console.beta_key, model=MODEL).status_code == 200
    console.platform.entries()
    page = signed_in(console, console.beta_key).get("/console/limits")
    assert page.status_code == 200, page.text
    assert '<dd id="spent">$0.002500</dd>' in page.text
    assert '<dd id="hard-cap">$4.000000' in page.text and '<dd id="soft-cap">none' in page.text
    assert '<meter id="budget-use" min="0" max="4000000" value="2500"' in page.text
    assert "<td>tenant</td><td><code>beta</code></td><td>120</td><td></td><td></td><td>3</td>" in (
        table(page.text, "limits")
    )
    gamma = signed_in(console, console.gamma_key).get("/console/limits").text
    assert "$4.000000" not in gamma and "<td>120</td>" not in gamma


def test_an_owner_sets_the_budget_in_dollars(console: Console) -> None:
    client = signed_in(console, member_key(console, "beta", "olga", ["owner"]))
    csrf = csrf_of(client.get("/console/limits").text)
    saved = client.post(
        "/console/limits/budget",
        data={"csrf_token": csrf, "hard_cap_micros": "12.50", "soft_cap_micros": "$0.000250"},
        follow_redirects=False,
    )
    assert saved.status_code == 303 and saved.headers["location"] == "/console/limits"
    assert caps(console) == (12_500_000, 250)
    page = client.get("/console/limits").text
    assert '<dd id="hard-cap">$12.500000' in page and 'value="12.500000"' in page
    cleared = client.post(
        "/console/limits/budget",
        data={"csrf_token": csrf, "hard_cap_micros": "", "soft_cap_micros": "1"},
        follow_redirects=False,
    )
    assert cleared.status_code == 303
    assert caps(console) == (None, 1_000_000)


def test_bad_amounts_are_refused_before_anything_is_sent(console: Console) -> None:
    client = signed_in(console, member_key(console, "beta", "olga", ["owner"]))
    csrf = csrf_of(client.get("/console/limits").text)
    for bad in ("twelve", "1.2345678", "-5", "1e3"):
        refused = client.post(
            "/console/limits/budget",
            data={"csrf_token": csrf, "hard_cap_micros": bad, "soft_cap_micros": ""},
        )
        assert refused.status_code == 400 and "(invalid_amount)" in refused.text, bad
        assert f'value="{bad}"' in refused.text  # what was typed is kept to correct
    assert caps(console) is None
    forged = client.post("/console/limits/budget", data={"hard_cap_micros": "1"})
    assert forged.status_code == 403 and "csrf_refused" in forged.text


def test_a_member_without_the_role_is_refused_with_the_apis_code(console: Console) -> None:
    client = signed_in(console, console.beta_key)  # consumer and billing: reads, not sets
    shown = client.get("/console/limits").text
    assert 'id="no-budget"' in shown and 'role="alert"' not in shown
    csrf = csrf_of(shown)
    refused = client.post(
        "/console/limits/budget",
        data={"csrf_token": csrf, "hard_cap_micros": "1", "soft_cap_micros": ""},
    )
    assert refused.status_code == 403
    assert re.search(r'id="form-error">[^<]*tenant\.manage[^<]*\(forbidden\)<', refused.text)
    assert caps(console) is None
    consumer_only = signed_in(console, console.platform.key).get("/console/limits")
    assert consumer_only.status_code == 200  # the limits, without the budget
    assert re.search(r'id="budget-error">[^<]*\(forbidden\)<', consumer_only.text)
    assert 'id="limits"' in consumer_only.text


# ---- jobs


@pytest.fixture
def quiet(tmp_path: Path, database_url: str) -> Iterator[Console]:
    """The console's platform with no job runner: jobs wait queued until a test drains
    them."""
    platform = make_platform(tmp_path / "home", database_url, job_runner_concurrency=0)
    try:
        yield seed(platform)
    finally:
        platform.close_client()
        platform.services.close()


def submit(console: Console, **body: Any) -> str:
    body.setdefault("target", {"model": MODEL})
    response = console.platform.client.post(
        "/api/jobs", json=body, headers={"Authorization": f"Bearer {console.beta_key}"}
    )
    assert response.status_code == 202, response.text
    return str(response.json()["id"])


def submit_batch(console: Console, rows: int, shard_rows: int) -> str:
    data = io.BytesIO()
    np.save(data, np.arange(rows * 4, dtype=np.float32).reshape(rows, 4))
    file = console.services.files.create("beta", "user_data", "rows.npy", data.getvalue())
    pipeline = [
        {"name": "shards", "implementation": "tensor_shards", "params": {"shard_rows": shard_rows}},
        {"name": "publish", "implementation": "tensor_publish"},
    ]
    return submit(console, input_digest=file.digest, pipeline=pipeline)


def adder_inputs() -> list[dict[str, Any]]:
    return [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1, 2, 3, 4]}]


def test_jobs_are_listed_by_state_and_paged_by_cursor(
    quiet: Console, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = submit(quiet, inputs=adder_inputs())
    second = submit(quiet, inputs=adder_inputs())
    client = signed_in(quiet, quiet.beta_key)
    listed = table(client.get("/console/jobs").text, "jobs")
    assert first in listed and second in listed and listed.count(">queued<") == 2
    assert first not in client.get("/console/jobs", params={"state": "succeeded"}).text
    monkeypatch.setattr(jobs_pages, "PAGE_SIZE", 1)
    page = client.get("/console/jobs").text
    assert second in page and first not in page  # newest first
    next_url = re.search(r'<a href="([^"]+)" rel="next">', page)
    assert next_url
    following = client.get(next_url[1].replace("&amp;", "&")).text
    assert first in table(following, "jobs") and second not in table(following, "jobs")
    assert 'href="/console/jobs">First page' in following
    assert first not in signed_in(quiet, quiet.gamma_key).get("/console/jobs").text


def test_a_batch_jobs_page_shows_progress_stages_and_signed_outputs(quiet: Console) -> None:
    job_id = submit_batch(quiet, rows=25, shard_rows=10)
    client = signed_in(quiet, quiet.beta_key)
    waiting = client.get(f"/console/jobs/{job_id}").text
    assert '<progress id="job-progress" max="25" value="0"' in waiting
    assert 'data-refresh="3"' in waiting and "Cancel job" in waiting
    Jobs(quiet.platform).drain()
    done = client.get(f"/console/jobs/{job_id}")
    assert done.status_code == 200, done.text
    assert '<progress id="job-progress" max="25" value="25"' in done.text
    assert "25 rows done, 0 failed, of 25 (100%)" in done.text
    assert "data-refresh" not in done.text and "Cancel job" not in done.text
    stages = table(done.text, "stages")
    assert "<td>shards</td><td>tensor_shards</td><td>done</td><td>1</td>" in stages
    links = re.findall(r'href="(/api/jobs/[^"]+)" download>shard', table(done.text, "shards"))
    assert len(links) == 3
    anonymous = browser_client(quiet)  # signed in as no one: the signature is the credential
    shard = anonymous.get(links[0].replace("&amp;", "&"))
    assert shard.status_code == 200
    expected = np.arange(40, dtype=np.float32).reshape(10, 4) + 1  # the adder's answer
    np.testing.assert_array_equal(np.load(io.BytesIO(shard.content)), expected)


def test_a_job_is_cancelled_from_its_page_once(quiet: Console) -> None:
    job_id = submit(quiet, inputs=adder_inputs())
    client = signed_in(quiet, quiet.beta_key)
    csrf = csrf_of(client.get(f"/console/jobs/{job_id}").text)
    forged = client.post(f"/console/jobs/{job_id}/cancel", data={})
    assert forged.status_code == 403
    assert quiet.services.jobs.get(None, job_id).state.value == "queued"
    cancelled = client.post(
        f"/console/jobs/{job_id}/cancel", data={"csrf_token": csrf}, follow_redirects=False
    )
    assert cancelled.status_code == 303
    assert quiet.services.jobs.get(None, job_id).state.value == "cancelled"
    page = client.get(cancelled.headers["location"]).text
    assert 'id="job-state" class="state state-cancelled">cancelled<' in page
    again = client.post(f"/console/jobs/{job_id}/cancel", data={"csrf_token": csrf})
    assert again.status_code == 409 and "(job_finished)" in again.text


def test_a_finished_jobs_tensors_are_shown(quiet: Console) -> None:
    job_id = submit(quiet, inputs=adder_inputs())
    Jobs(quiet.platform).drain()
    page = signed_in(quiet, quiet.beta_key).get(f"/console/jobs/{job_id}").text
    assert 'state-succeeded">succeeded<' in page
    assert re.search(r"<td>1 \u00d7 4</td><td><code>2\.0, 3\.0, 4\.0, 5\.0</code>", page), page
    assert "job-progress" not in page  # not a batch: no rows to count


def test_another_tenants_job_is_not_found_by_url(quiet: Console) -> None:
    job_id = submit(quiet, inputs=adder_inputs())
    gamma = signed_in(quiet, quiet.gamma_key)
    shown = gamma.get(f"/console/jobs/{job_id}")
    assert shown.status_code == 404 and "job_not_found" in shown.text
    assert MODEL not in shown.text
    csrf = csrf_of(gamma.get("/console/jobs").text)
    cancel = gamma.post(f"/console/jobs/{job_id}/cancel", data={"csrf_token": csrf})
    assert cancel.status_code == 404 and "job_not_found" in cancel.text
    assert quiet.services.jobs.get(None, job_id).state.value == "queued"


def test_the_platform_admin_chooses_the_tenant_whose_budget_to_set(console: Console) -> None:
    client = signed_in(console, ADMIN_KEY)
    asked = client.get("/console/limits")
    assert asked.status_code == 200 and 'id="budget"' not in asked.text
    shown = client.get("/console/limits", params={"tenant": "beta"}).text
    assert 'name="tenant" value="beta"' in shown and 'id="no-budget"' in shown
    saved = client.post(
        "/console/limits/budget",
        data={"csrf_token": csrf_of(shown), "tenant": "beta", "hard_cap_micros": "3"},
        follow_redirects=False,
    )
    assert saved.status_code == 303 and saved.headers["location"] == "/console/limits?tenant=beta"
    assert caps(console) == (3_000_000, None)
    unknown = client.get("/console/limits", params={"tenant": "nobody"})
    assert "(tenant_not_found)" in unknown.text
