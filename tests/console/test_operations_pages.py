"""The operations views over the real app: an endpoint's drift, quality and SLOs on its
page (from a seeded drifted stream, joined outcomes and logged failures), its drift on
the publisher's workbench, the operator's cost, revenue and margin per tenant and model
with each tenant's share on its usage page, and retention: every tenant's setting and
the audited sweeps for the operator, a tenant's own with the deletion form. Another
tenant sees none of it."""

from __future__ import annotations

import html as html_text
import re
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import select
from starlette.testclient import TestClient

from modelport.metering.types import PriceSnapshot
from modelport.observability.prediction_store import PredictionRepository
from modelport.observability.predictions import detail_fields
from modelport.observability.types import LogPolicy, PredictionRecord
from modelport.store.tables import PredictionRow
from tests.conftest import ADMIN_KEY
from tests.console.conftest import Console, browser_client, console_world, csrf_of, sign_in
from tests.console.endpoint_seed import key_of, wait_for
from tests.metering.conftest import usage_event

WATCHED = "watch"  # acme's endpoint of acme/summer:1 whose stream is seeded
TIMED = "timed"  # acme's endpoint with SLOs
LOGGED = LogPolicy(inputs=True, outputs=True)
CORE_SECOND = 4000.0  # micros a core-second


def text_of(html: str) -> str:
    return html_text.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)))


def signed_in(console: Console, key: str) -> TestClient:
    client = browser_client(console)
    sign_in(client, key)
    return client


def owner_key(console: Console, tenant: str, member: str) -> str:
    tenancy = console.services.tenancy
    tenancy.add_member(tenant, member, roles=["owner"], actor="admin")
    secret: str = tenancy.create_key(tenant, member, name="k", actor="admin").secret
    return secret


def records(
    n: int,
    *,
    endpoint: str,
    version: str,
    at: datetime,
    prefix: str,
    shift: float = 0.0,
    seed: int = 0,
    **fields: Any,
) -> list[PredictionRecord]:
    """``n`` answered predictions of acme/summer:``version`` on acme's ``endpoint``,
    two features (the second moved by ``shift``), from ``at`` a second apart."""
    rng = np.random.default_rng(seed)
    found = []
    for i in range(n):
        x = np.array([[rng.normal(0, 1), rng.normal(shift, 1)]], dtype=np.float32)
        y = x.sum(axis=1)
        base: dict[str, Any] = {
            "id": f"{prefix}{i:05d}",
            "endpoint": endpoint,
            "owner": "acme",
            "model": "acme/summer",
            "version": version,
            "backend": "local",
            "received_at": at + timedelta(seconds=i),
            "latency_seconds": 0.002,
            "tenant": "beta",
            "answer_value": float(y[0]),
        }
        found.append(
            PredictionRecord(**(base | detail_fields(LOGGED, {"x": x}, {"y": y}) | fields))
        )
    return found


def insert(console: Console, rows: list[PredictionRecord]) -> None:
    PredictionRepository(console.services.database).insert(rows)


def create_endpoint(console: Console, name: str) -> None:
    admin = console.platform.client
    created = admin.post("/api/endpoints", json={"name": name, "tenant": "acme"})
    assert created.status_code == 201, created.text


@pytest.fixture
def watched(console: Console) -> Console:
    """acme's endpoint ``watch`` serving acme/summer:1, whose log holds a week-old
    reference and, in the monitor's window, version 1 unshifted and version 2 with its
    second feature shifted; version 1's answers joined to outcomes (beta's all right,
    gamma's half)."""
    create_endpoint(console, WATCHED)
    admin = console.platform.client
    deployed = admin.post(
        f"/api/endpoints/{WATCHED}/deployments",
        json={"versions": [{"model": "acme/summer", "version": "1", "weight": 100}]},
    )
    assert deployed.status_code == 202, deployed.text
    ident = deployed.json()["id"]
    wait_for(
        lambda: (
            admin.get(f"/api/endpoints/{WATCHED}/deployments/{ident}").json()["state"] == "active"
        ),
        "the deployment",
    )
    now = console.services.clock.now()
    insert(console, records(300, endpoint=WATCHED, version="1", at=now - timedelta(hours=48), prefix="r", seed=1))  # fmt: skip
    steady = records(120, endpoint=WATCHED, version="1", at=now - timedelta(hours=2), prefix="a", seed=2, answer_label="1")  # fmt: skip
    for i, row in enumerate(steady[:40]):
        steady[i] = replace(row, tenant="gamma" if i % 2 else "beta")
    insert(console, steady)
    insert(console, records(120, endpoint=WATCHED, version="2", at=now - timedelta(hours=2), prefix="b", seed=3, shift=1.5))  # fmt: skip
    for i, row in enumerate(steady[:40]):
        truth = "0" if row.tenant == "gamma" and i % 4 == 1 else "1"
        posted = admin.post(f"/api/predictions/{row.id}/outcome", json={"label": truth})
        assert posted.status_code == 201, posted.text
    put = admin.put(
        f"/api/endpoints/{WATCHED}/monitor", json={"slice_by": "tenant", "min_samples": 10}
    )
    assert put.status_code == 200, put.text
    return console


def test_an_endpoints_page_shows_its_drift_per_feature_and_quality_by_slice(
    watched: Console,
) -> None:
    deployer = key_of(watched, "dee", "deployer")
    page = signed_in(watched, deployer).get(f"/console/endpoints/{WATCHED}")
    assert page.status_code == 200, page.text
    drift = page.text.split('id="drift"', 1)[1].split("</section>", 1)[0]
    text = text_of(drift)
    assert "acme/summer:1: within limits (120 predictions, 300 in the reference)" in text
    assert "acme/summer:2: in breach" in text
    assert "input x[1] drifted" in text
    tables = re.findall(r'<table class="drift".*?</table>', drift, re.S)
    steady, moved = (text_of(t) for t in tables)
    assert "drifted" not in steady.replace("Drifted", "")
    row = re.search(r"x\[1\] input numeric ([\d.]+) KS ([\d.e-]+) 300 / 120 drifted", moved)
    assert row, moved
    assert float(row[1]) > 0.2 and float(row[2]) < 0.01
    assert re.search(r"x\[0\] input numeric [\d.]+ KS [\d.e-]+ 300 / 120 no", moved)
    assert 'class="flagged"' in tables[1] and 'class="flagged"' not in tables[0]
    # Quality by tenant: beta's 20 all right, gamma's 20 with 10 wrong.
    quality = text_of(re.search(r'<table class="quality".*?</table>', drift, re.S)[0])  # type: ignore[index]
    assert "all 40 75.0%" in quality
    assert "beta 20 100.0%" in quality and "gamma 20 50.0%" in quality


def test_an_endpoints_page_shows_its_slos_budget_and_burn_rates(console: Console) -> None:
    create_endpoint(console, TIMED)
    slos = [
        {"name": "available", "kind": "availability", "objective": 0.99, "window_days": 1},
        {
            "name": "fast",
            "kind": "latency",
            "objective": 0.9,
            "threshold_ms": 100,
            "window_days": 1,
        },
        {"name": "jobs_done", "kind": "completion", "objective": 0.95, "threshold_ms": 60000},
    ]
    put = console.platform.client.put(f"/api/endpoints/{TIMED}/slos", json={"slos": slos})
    assert put.status_code == 200, put.text
    # The log is stamped with wall time: 50 answers 3 minutes ago; 2 hours ago 48 more
    # (5 slow) and 2 failures; a call the caller cancelled counts neither way, nor do a
    # shadow's copies; 2 failures two days ago count in the 3-day window only.
    now = datetime.now(UTC)
    rows = records(50, endpoint=TIMED, version="1", at=now - timedelta(minutes=3), prefix="n")
    older = records(51, endpoint=TIMED, version="1", at=now - timedelta(hours=2), prefix="o")
    for i in range(5):
        older[i] = replace(older[i], latency_seconds=0.5)
    for i, status in ((48, "unavailable"), (49, "internal"), (50, "cancelled")):
        older[i] = replace(older[i], status=status)
    outside = records(2, endpoint=TIMED, version="1", at=now - timedelta(days=2), prefix="x", status="internal")  # fmt: skip
    shadow = records(3, endpoint=TIMED, version="1", at=now - timedelta(minutes=1), prefix="s", status="internal", shadow_of="n00000")  # fmt: skip
    insert(console, rows + older + outside + shadow)

    api = console.platform.client.get(f"/api/endpoints/{TIMED}/slos/status")
    assert api.status_code == 200, api.text
    available, fast, jobs = api.json()["items"]
    assert (available["events"], available["bad_events"]) == (100, 2)
    assert available["error_budget_remaining"] == pytest.approx(1 - 0.02 / 0.01)
    burns = {b["window"]: b["burn_rate"] for b in available["burn_rates"]}
    assert burns["5m"] == 0 and burns["1h"] == 0
    assert burns["6h"] == pytest.approx(2.0) and burns["1d"] == pytest.approx(2.0)
    assert burns["3d"] == pytest.approx((4 / 102) / 0.01)  # the 2 failures 2 days ago too
    assert (fast["events"], fast["bad_events"]) == (98, 5)
    assert fast["error_budget_remaining"] == pytest.approx(1 - (5 / 98) / 0.1)
    assert jobs["measured"] is False

    deployer = key_of(console, "dee", "deployer")
    page = signed_in(console, deployer).get(f"/console/endpoints/{TIMED}")
    assert page.status_code == 200
    table = text_of(re.search(r'<table id="slo-status">.*?</table>', page.text, re.S)[0])  # type: ignore[index]
    assert "Burn 5m Burn 1h Burn 6h Burn 1d Burn 3d" in table
    assert (
        "available availability: 99.000% 1 d 100 (2) -100.0% (overspent) 0.00 0.00 2.00 2.00 3.92"
        in table
    )
    assert (
        "fast latency: 90.000% within 100.0 ms 1 d 98 (5) 49.0% 0.00 0.00 0.51 0.51 0.51" in table
    )
    assert "jobs_done completion" in table and "measured from jobs" in table


def test_another_tenant_sees_no_drift_nor_slos(watched: Console) -> None:
    gamma = signed_in(watched, watched.gamma_key)
    page = gamma.get(f"/console/endpoints/{WATCHED}")
    assert page.status_code == 404
    assert "Drift" not in page.text and "x[1]" not in page.text
    for path in ("monitoring", "slos/status"):
        answer = gamma.get(
            f"/api/endpoints/{WATCHED}/{path}",
            headers={"Authorization": f"Bearer {watched.gamma_key}"},
        )
        assert answer.status_code == 404, answer.text


def test_the_workbench_shows_drift_of_the_publishers_endpoints(watched: Console) -> None:
    publisher = owner_key(watched, "acme", "olga")
    page = signed_in(watched, publisher).get("/console/publisher/models/acme/summer")
    assert page.status_code == 200, page.text
    table = text_of(re.search(r'<table id="drift-versions">.*?</table>', page.text, re.S)[0])  # type: ignore[index]
    assert "watch 1 120 within limits none" in table
    assert "watch 2 120 in breach x[1]" in table
    # Another tenant's workbench view of acme's model is refused before any drift.
    other = signed_in(watched, watched.gamma_key).get("/console/publisher/models/acme/summer")
    assert other.status_code == 404 and "drift-versions" not in other.text


# ---- costs


@pytest.fixture
def priced(tmp_path: Path, database_url: str, request: pytest.FixtureRequest) -> Iterator[Console]:
    """The console world with compute priced per core-second, and this month's calls in
    the ledger: beta's 3 to acme/summer (600 ms, charged 1,000 each), gamma's one to
    acme/secret (200 ms, free)."""
    for world in console_world(
        tmp_path, database_url, request, cost_per_core_second_micros=CORE_SECOND
    ):
        now = world.services.clock.now()
        paid = PriceSnapshot(rule_id=None, unit_price_micros=1_000)
        events = [
            usage_event(
                f"b{i}",
                tenant="beta",
                model="acme/summer",
                price=paid,
                at=now,
                compute_ms=200.0,
                prediction_id=f"pb{i}",
            )
            for i in range(3)
        ]
        events.append(
            usage_event(
                "g0",
                tenant="gamma",
                model="acme/secret",
                at=now,
                compute_ms=200.0,
                prediction_id="pg0",
            )
        )
        world.services.metering.ledger.record(events)
        yield world


def test_the_operator_sees_cost_revenue_and_margin_per_tenant_and_model(priced: Console) -> None:
    admin = signed_in(priced, ADMIN_KEY)
    page = admin.get("/console/operator/costs")
    assert page.status_code == 200, page.text
    tenants = text_of(re.search(r'<table id="cost-tenants">.*?</table>', page.text, re.S)[0])  # type: ignore[index]
    assert "beta 600.0 ms $0.002400 75.0%" in tenants
    assert "gamma 200.0 ms $0.000800 25.0%" in tenants
    models = text_of(re.search(r'<table id="cost-models">.*?</table>', page.text, re.S)[0])  # type: ignore[index]
    assert "acme/summer 3 600.0 ms $0.002400 $0.003000 $0.000600" in models
    assert "acme/secret 1 200.0 ms $0.000800 $0.000000 -$0.000800" in models
    assert "Total 4 800.0 ms $0.003200 $0.003000 -$0.000200" in models
    assert "idle ratio" in text_of(page.text)
    wrong = admin.get("/console/operator/costs?period=2026-13")
    assert wrong.status_code == 400 and 'id="error"' in wrong.text


def test_a_tenant_sees_its_own_cost_share_and_not_the_operators_view(priced: Console) -> None:
    ana = signed_in(priced, priced.beta_key)  # beta's consumer and billing member
    usage = ana.get("/console/usage")
    assert usage.status_code == 200
    share = text_of(usage.text.split('id="cost-share"', 1)[1].split("</section>", 1)[0])
    assert "75.0% of the compute every tenant's calls used: 3 calls, 600.0 ms" in share
    assert "acme/summer 3 600.0 ms" in share
    assert "acme/secret" not in share and "$" not in share  # no prices, costs nor margins
    costs = ana.get("/console/operator/costs")
    assert costs.status_code == 403 and "cost-tenants" not in costs.text
    other = priced.platform.client.get(
        "/api/tenants/beta/costs", headers={"Authorization": f"Bearer {priced.gamma_key}"}
    )
    assert other.status_code == 404


# ---- retention


def kept(console: Console) -> set[str]:
    with console.services.database.transaction() as session:
        return set(session.scalars(select(PredictionRow.id)))


def test_the_operator_sees_each_tenants_retention_and_the_audited_sweep(console: Console) -> None:
    admin = console.platform.client
    assert admin.put("/api/tenants/acme/retention", json={"days": 30}).status_code == 200
    now = datetime.now(UTC)
    insert(
        console, records(3, endpoint="e", version="1", at=now - timedelta(days=40), prefix="old")
    )
    insert(console, records(2, endpoint="e", version="1", at=now - timedelta(days=1), prefix="new"))
    assert console.services.retention.sweep() == 3
    page = signed_in(console, ADMIN_KEY).get("/console/operator/retention")
    assert page.status_code == 200
    table = text_of(re.search(r'<table id="retention">.*?</table>', page.text, re.S)[0])  # type: ignore[index]
    assert "acme 30 days the tenant" in table
    # The page reads every tenant's in one answer, the platform admin's alone.
    assert admin.get("/api/retention").json() == {
        "default_days": 90,
        "tenants": [{"tenant": "acme", "days": 30}],
    }
    refused = admin.get("/api/retention", headers={"Authorization": f"Bearer {console.gamma_key}"})
    assert refused.status_code == 403, refused.text
    assert "beta 90 days the installation's default" in table
    sweeps = text_of(re.search(r'<table id="sweeps">.*?</table>', page.text, re.S)[0])  # type: ignore[index]
    assert "system:retention acme success (200) retention of 30 days erased 3 predictions" in sweeps
    # Another tenant's consumer sees its own tenant's retention, none of the others',
    # and the API's refusal of the audit log.
    other = signed_in(console, console.gamma_key).get("/console/operator/retention")
    assert other.status_code == 200
    rows = text_of(re.search(r'<table id="retention">.*?</table>', other.text, re.S)[0])  # type: ignore[index]
    assert "gamma 90 days" in rows and "acme" not in rows and "beta" not in rows
    assert "erased 3" not in other.text and "(forbidden)" in other.text


def test_a_tenant_deletes_its_logged_predictions_through_the_form(console: Console) -> None:
    now = datetime.now(UTC)
    mine = records(4, endpoint="e", version="1", at=now, prefix="beta-", tenant="beta")
    theirs = records(2, endpoint="e", version="1", at=now, prefix="gamma-", tenant="gamma")
    insert(console, mine + theirs)
    owner = signed_in(console, owner_key(console, "beta", "bob"))
    page = owner.get("/console/data")
    assert page.status_code == 200
    assert "90 days (the installation's default)" in text_of(page.text)
    token = csrf_of(page.text)

    forged = owner.post("/console/data/forget", data={"confirm": "beta"}, follow_redirects=False)
    assert forged.status_code == 403
    unconfirmed = owner.post(
        "/console/data/forget",
        data={"csrf_token": token, "confirm": "gamma"},
        follow_redirects=False,
    )
    assert unconfirmed.status_code == 400 and "deletion_not_confirmed" in unconfirmed.text
    assert len(kept(console)) == 6

    done = owner.post(
        "/console/data/forget",
        data={"csrf_token": token, "confirm": "beta"},
        follow_redirects=False,
    )
    assert done.status_code == 303 and done.headers["location"] == "/console/data?deleted=4&jobs=0"
    assert kept(console) == {r.id for r in theirs}
    after = owner.get(done.headers["location"])
    assert (
        "4 logged predictions were deleted, and the inputs and outputs of 0 jobs erased."
        in after.text
    )
    deletions = text_of(re.search(r'<table id="deletions">.*?</table>', after.text, re.S)[0])  # type: ignore[index]
    erased = "erased 0 jobs, 0 jobs_unfinished, 4 predictions"
    assert f"beta/bob beta success (200) {erased}" in deletions
    audit = console.platform.client.get("/api/audit", params={"action": "retention.forget"})
    [event] = audit.json()["items"]
    assert (event["actor"], event["tenant"], event["reason"]) == (
        "beta/bob",
        "beta",
        erased,
    )


def test_a_member_who_may_not_manage_the_tenant_is_refused(console: Console) -> None:
    insert(console, records(2, endpoint="e", version="1", at=datetime.now(UTC), prefix="p"))
    ana = signed_in(console, console.beta_key)  # consumer and billing: no tenant.manage
    page = ana.get("/console/data")
    assert page.status_code == 200
    refused = ana.post(
        "/console/data/forget",
        data={"csrf_token": csrf_of(page.text), "confirm": "beta"},
        follow_redirects=False,
    )
    assert refused.status_code == 403 and "(forbidden)" in refused.text
    assert len(kept(console)) == 2
