"""The publisher workbench: acme's index, model and validation pages show calls and
revenue of acme/summer's version 1 after beta's calls; other tenants are refused by
URL with the API's codes; a statement has its own page."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from starlette.testclient import TestClient

from modelport.console.earnings import Earned, by_day, by_version
from modelport.registry import repository as registry_repo
from tests.conftest import ADMIN_KEY
from tests.console.conftest import MODEL, PRICE_MICROS, Console, browser_client, sign_in

WORKBENCH = f"/console/publisher/models/{MODEL}"
VALIDATION = f"{WORKBENCH}/versions/1/validation"


def acme_member(console: Console, role: str = "owner") -> TestClient:
    """A browser signed in as a member of acme with ``role``."""
    tenancy = console.services.tenancy
    tenancy.add_member("acme", f"m-{role}", roles=[role], actor="admin")
    key = tenancy.create_key("acme", f"m-{role}", name="k", actor="admin").secret
    client = browser_client(console)
    sign_in(client, key)
    return client


def beta_calls(console: Console, calls: int) -> None:
    for _ in range(calls):
        assert console.platform.infer(console.beta_key, model=MODEL).status_code == 200
    console.platform.entries()


def table(html: str, table_id: str) -> str:
    found = re.search(rf'<table id="{table_id}">(.*?)</table>', html, re.S)
    assert found, f"no table {table_id}"
    return found[1]


def share_of_two_calls(console: Console) -> int:
    body: dict[str, Any] = console.platform.client.get(
        "/api/revenue", params={"publisher": "acme"}
    ).json()
    assert body["revenue_micros"] == 2 * PRICE_MICROS
    share: int = body["publisher_share_micros"]
    assert 0 < share < 2 * PRICE_MICROS
    return share


def dollars(micros: int) -> str:
    return f"${micros // 1_000_000}.{micros % 1_000_000:06d}"


def test_the_index_shows_models_their_newest_version_and_revenue_by_day(console: Console) -> None:
    beta_calls(console, 2)
    share = share_of_two_calls(console)
    client = acme_member(console)
    page = client.get("/console/publisher")
    assert page.status_code == 200, page.text
    models = table(page.text, "models")
    summer = re.search(
        rf'<tr>\s*<th scope="row"><a href="{WORKBENCH}">{MODEL}</a></th>(.*?)</tr>', models, re.S
    )
    assert summer, models
    cells = re.findall(r"<td>(.*?)</td>", summer[1], re.S)
    assert cells[0] == "public" and cells[1] == "1" and "approved" in cells[2]
    assert cells[3:] == ["2", dollars(2 * PRICE_MICROS), dollars(share)]
    assert "acme/secret" in models  # private models are the publisher's too
    today = datetime.now(UTC).date().isoformat()
    by_day = table(page.text, "revenue-by-day")
    assert f'<th scope="row">{today}</th><td>2</td><td>{dollars(2 * PRICE_MICROS)}</td>' in by_day
    assert 'id="chart-day-t"' in page.text and 'id="chart-model-t"' in page.text
    assert "No statements yet" in page.text
    bad = client.get("/console/publisher", params={"period": "2026-13"})
    assert bad.status_code == 400 and "invalid_period" in bad.text
    earlier = client.get("/console/publisher", params={"period": "2020-01"})
    assert earlier.status_code == 200 and "No calls to your models in 2020-01" in earlier.text


def test_the_model_workbench_shows_each_versions_state_aliases_validation_and_revenue(
    console: Console,
) -> None:
    beta_calls(console, 2)
    share = share_of_two_calls(console)
    alias = console.platform.client.put(f"/api/models/{MODEL}/aliases/prod", json={"version": "1"})
    assert alias.status_code in (200, 201), alias.text
    page = acme_member(console).get(WORKBENCH)
    assert page.status_code == 200, page.text
    versions = table(page.text, "versions")
    assert 'state-approved">approved' in versions and '<span class="pill">prod</span>' in versions
    assert f'<a href="{VALIDATION}">not validated</a>' in versions
    assert (
        f"<td>2</td>\n        <td>{dollars(2 * PRICE_MICROS)}</td>\n        <td>{dollars(share)}</td>"
        in versions
    )
    assert 'id="chart-v1-t">Revenue of version 1 by day' in page.text
    today = datetime.now(UTC).date().isoformat()
    assert f'<th scope="row">{today}</th><td>2</td>' in page.text
    # Another month: no calls, said plainly; a bad month is the API's 400.
    billing = acme_member(console, "billing")
    empty = billing.get(WORKBENCH, params={"period": "2020-01"})
    assert empty.status_code == 200 and "No calls to version 1 in 2020-01" in empty.text
    bad = billing.get(WORKBENCH, params={"period": "soon"})
    assert bad.status_code == 400 and "invalid_period" in bad.text


def test_a_member_without_billing_sees_versions_but_not_money(console: Console) -> None:
    beta_calls(console, 1)
    page = acme_member(console, "publisher").get(WORKBENCH)
    assert page.status_code == 200, page.text
    assert 'state-approved">approved' in table(page.text, "versions")
    assert 'role="alert"' in page.text and dollars(PRICE_MICROS) not in page.text


def test_the_validation_page_before_and_after_a_report(console: Console) -> None:
    client = acme_member(console)
    before = client.get(VALIDATION)
    assert before.status_code == 200 and 'id="not-validated"' in before.text
    report = {
        "passed": False,
        "cause": "examples_failed",
        "detail": "example 0 differs <b>",
        "format": "onnx",
        "executed": True,
        "sandbox": {
            "isolation": "bubblewrap",
            "seccomp": True,
            "network": "none",
            "environment": "empty",
            "filesystem": "read-only view, private scratch",
        },
        "checks": [
            {"check": "file", "path": "model.onnx", "size": 10, "passed": True, "detail": "ok"}
        ],
        "examples": [
            {"index": 0, "passed": False, "problems": ["y: expected 2, got 3"], "ms": 1.5}
        ],
        "timings_ms": {"files": 2.0, "execution": 40.5, "total": 43.0},
        "limits": {"timeout_seconds": 60, "memory_bytes": 1024},
    }
    with console.services.database.transaction() as session:
        vid = registry_repo.version_id(session, "acme", "summer", "1")
        registry_repo.add_report(session, vid, report)
    after = client.get(VALIDATION)
    assert after.status_code == 200, after.text
    assert 'state-rejected">failed' in after.text and "<code>examples_failed</code>" in after.text
    assert "example 0 differs &lt;b&gt;" in after.text  # the report's text is escaped
    assert "<dt>Isolation</dt><dd>bubblewrap</dd>" in after.text
    assert '<th scope="row">execution</th><td>40.5</td>' in after.text
    assert "y: expected 2, got 3" in table(after.text, "examples")
    assert '<th scope="row">model.onnx</th>' in table(after.text, "checks")
    assert ">failed</a>" in client.get(WORKBENCH).text
    missing = client.get(f"{WORKBENCH}/versions/9/validation")
    assert missing.status_code == 404 and "version_not_found" in missing.text


def test_other_tenants_are_refused_acmes_workbench_by_url(console: Console) -> None:
    beta_calls(console, 1)
    console.platform.client.post("/api/billing/generate", json={"period": _period()})
    [statement] = console.platform.client.get(
        "/api/statements", params={"publisher": "acme"}
    ).json()["items"]
    for key in (console.beta_key, console.gamma_key):
        client = browser_client(console)
        sign_in(client, key)
        for path in (WORKBENCH, VALIDATION, "/console/publisher/models/acme/secret"):
            refused = client.get(path)
            assert refused.status_code == 404, (path, refused.text)
            assert "tenant_not_found" in refused.text and dollars(PRICE_MICROS) not in refused.text
        theirs = client.get(f"/console/publisher/statements/{statement['id']}")
        assert theirs.status_code == 404 and "statement_not_found" in theirs.text
        index = client.get("/console/publisher")
        assert index.status_code == 200 and MODEL not in index.text
    garbage = browser_client(console)
    sign_in(garbage, console.gamma_key)
    assert garbage.get("/console/publisher/statements/x1").status_code == 404


def test_a_statement_has_its_own_page(console: Console) -> None:
    beta_calls(console, 2)
    period = _period()
    generated = console.platform.client.post("/api/billing/generate", json={"period": period})
    assert generated.status_code == 200, generated.text
    client = acme_member(console)
    index = client.get("/console/publisher").text
    link = re.search(r'<a href="(/console/publisher/statements/\d+)">' + period + "</a>", index)
    assert link, table(index, "statements")
    page = client.get(link[1])
    assert page.status_code == 200, page.text
    lines = table(page.text, "statement-lines")
    assert f"<td>{MODEL}</td><td>1</td><td>prediction</td><td>2</td>" in lines
    assert dollars(2 * PRICE_MICROS) in lines


def test_the_platform_admin_opens_any_publishers_workbench(console: Console) -> None:
    beta_calls(console, 1)
    client = browser_client(console)
    sign_in(client, ADMIN_KEY)
    page = client.get(WORKBENCH)
    assert page.status_code == 200 and dollars(PRICE_MICROS) in table(page.text, "versions")


def _period() -> str:
    return datetime.now(UTC).strftime("%Y-%m")


def test_days_without_calls_are_zero_bars_between_the_first_and_last() -> None:
    items = [
        {
            "day": "2026-10-30",
            "model": "a/m",
            "version": "2",
            "calls": 1,
            "revenue_micros": 5,
            "publisher_share_micros": 3,
        },
        {
            "day": "2026-11-01",
            "model": "a/m",
            "version": "1",
            "calls": 2,
            "revenue_micros": 7,
            "publisher_share_micros": 4,
        },
        {
            "day": "2026-11-01",
            "model": "a/m",
            "version": "2",
            "calls": 1,
            "revenue_micros": 1,
            "publisher_share_micros": 0,
        },
    ]
    assert by_day(items) == [
        Earned("2026-10-30", 1, 5, 3),
        Earned("2026-10-31", 0, 0, 0),
        Earned("2026-11-01", 3, 8, 4),
    ]
    assert by_version(items)["1"] == [Earned("2026-11-01", 2, 7, 4)]
    assert by_day([]) == []
