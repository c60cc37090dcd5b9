"""``modelport billing``: the server verbs over real HTTP, and recompute and reconcile
straight on the database (exit status 1 on any difference)."""

from __future__ import annotations

import json
from typing import Any

import click
import pytest
from click.testing import CliRunner, Result
from sqlalchemy import text

from modelport.cli import modelport
from modelport.cli.billing.output import money, parse_money
from modelport.cli.billing.reconcile import parse_threshold
from modelport.metering.ledger import Ledger
from modelport.metering.types import BalanceScope
from tests.conftest import ADMIN_KEY, LiveServer
from tests.metering.billing.factories import event, price
from tests.metering.billing.test_api import OCTOBER


def run(server: LiveServer | None, key: str, *args: str, as_json: bool = False) -> Result:
    base = ["--url", server.url, "--api-key", key] if server else []
    base += ["--json"] if as_json else []
    # A wide terminal, so that tables print whole names on one line.
    runner = CliRunner(env={"COLUMNS": "160"})
    return runner.invoke(modelport, [*base, *args], catch_exceptions=False)


def run_json(server: LiveServer | None, key: str, *args: str) -> Any:
    result = run(server, key, *args, as_json=True)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.fixture
def seeded(live_server: LiveServer) -> LiveServer:
    services = live_server.services
    for tenant in ("acme", "globex"):
        services.tenancy.create_tenant(tenant, actor="admin", owner="boss")
    Ledger(services.database, now=lambda: OCTOBER).record(
        [
            event("globex", "acme/sentiment", "1", snapshot=price(1_250)),
            event("globex", "acme/sentiment", "1", snapshot=price(1_250)),
            event("acme", "globex/tokens", "2", snapshot=price(333, share_bps=5_000)),
        ]
    )
    return live_server


def test_invoices_statements_and_credits_over_http(seeded: LiveServer) -> None:
    generated = run_json(seeded, ADMIN_KEY, "billing", "generate", "--period", "2026-10")
    assert sorted(i["tenant"] for i in generated["invoices"]) == ["acme", "globex"]
    listed = run_json(seeded, ADMIN_KEY, "billing", "invoices", "list", "--tenant", "globex")
    [summary] = listed["items"]
    assert summary["total_micros"] == 2_500 and summary["status"] == "draft"

    shown = run(seeded, ADMIN_KEY, "billing", "invoices", "show", str(summary["id"]))
    assert shown.exit_code == 0, shown.output
    assert "acme/sentiment" in shown.output and "total: 0.002500" in shown.output

    final = run_json(seeded, ADMIN_KEY, "billing", "invoices", "finalize", str(summary["id"]))
    assert final["status"] == "finalized"
    again = run(seeded, ADMIN_KEY, "billing", "invoices", "finalize", str(summary["id"]))
    assert again.exit_code == 1 and "invoice_finalized" in again.stderr

    statements = run_json(seeded, ADMIN_KEY, "billing", "statements", "list", "--period", "2026-10")
    by_publisher = {s["publisher"]: s for s in statements["items"]}
    globex = by_publisher["globex"]
    assert (globex["revenue_micros"], globex["publisher_share_micros"]) == (333, 166)
    assert globex["platform_take_micros"] == 167
    shown = run(seeded, ADMIN_KEY, "billing", "statements", "show", str(globex["id"]))
    assert shown.exit_code == 0 and "globex/tokens" in shown.output

    credited = run_json(seeded, ADMIN_KEY, "billing", "credit", "acme", "12.5", "--reason", "wire")
    assert credited["balance_micros"] == 12_500_000
    run_json(seeded, ADMIN_KEY, "billing", "credit", "acme", "7", "--micros")
    balance = run_json(seeded, ADMIN_KEY, "billing", "balance", "acme")
    assert [b["balance_micros"] for b in balance["items"]] == [12_500_007]
    assert (
        seeded.services.billing.balances.get(BalanceScope.TENANT, "acme").balance_micros
        == 12_500_007
    )
    refused = run(seeded, "not-a-key", "billing", "credit", "acme", "1")
    assert refused.exit_code == 1


def test_tenant_keys_see_their_own_invoices_only(seeded: LiveServer) -> None:
    run_json(seeded, ADMIN_KEY, "billing", "generate", "--period", "2026-10")
    key = seeded.services.tenancy.create_key("acme", "boss", name="cli", actor="admin").secret
    mine = run_json(seeded, key, "billing", "invoices", "list")
    assert [i["tenant"] for i in mine["items"]] == ["acme"]
    other = run(seeded, key, "billing", "invoices", "list", "--tenant", "globex")
    assert other.exit_code == 1 and "tenant_not_found" in other.stderr
    denied = run(seeded, key, "billing", "credit", "acme", "1")
    assert denied.exit_code == 1 and "forbidden" in denied.stderr


def test_recompute_on_the_database_and_a_tampered_line(
    seeded: LiveServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    database = seeded.services.database
    monkeypatch.setenv("MODELPORT_DATABASE_URL", database.url)
    missing = run(None, "", "billing", "recompute", "--period", "2026-10")
    assert missing.exit_code == 1 and "missing" in missing.output

    run_json(seeded, ADMIN_KEY, "billing", "generate", "--period", "2026-10")
    clean = run(None, "", "billing", "recompute", "--period", "2026-10")
    assert clean.exit_code == 0, clean.output
    assert "3 usage events, 2 invoices, 2 statements" in clean.output
    report = run_json(None, "", "billing", "recompute", "--period", "2026-10")
    assert report["clean"] is True and report["differences"] == []

    with database.transaction() as session:
        session.execute(text("UPDATE invoice_lines SET quantity = quantity + 1 WHERE line_no = 1"))
    tampered = run(None, "", "billing", "recompute", "--period", "2026-10", as_json=True)
    assert tampered.exit_code == 1
    differences = json.loads(tampered.stdout)["differences"]
    assert {d["document"] for d in differences} == {"invoice:acme", "invoice:globex"}
    assert all(d["kind"] == "changed" and d["status"] == "draft" for d in differences)
    table = run(None, "", "billing", "recompute", "--period", "2026-10")
    assert table.exit_code == 1 and "2 difference(s)" in table.stderr

    bad = run(None, "", "billing", "recompute", "--period", "October")
    assert bad.exit_code == 1 and "invalid_period" in bad.stderr


def test_reconcile_on_the_database(seeded: LiveServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MODELPORT_DATABASE_URL", seeded.services.database.url)
    report = run_json(None, "", "billing", "reconcile", "--period", "2026-10", "--threshold", "5%")
    assert report == {
        "period": "2026-10",
        "threshold_bps": 500,
        "flagged": False,
        "tenants": [],
        "findings": [],
    }
    plain = run(None, "", "billing", "reconcile", "--period", "2026-10")
    assert plain.exit_code == 0, plain.output


def test_money_and_thresholds_are_exact() -> None:
    assert money(4_500) == "0.004500" and money(12_500_000) == "12.500000"
    assert money(-1) == "-0.000001"
    assert parse_money("12.5") == 12_500_000 and parse_money("0.000001") == 1
    assert parse_money("10000000000.000001") == 10_000_000_000_000_001
    for bad in ("0.0000001", "abc", "nan", "inf"):
        with pytest.raises(click.BadParameter):
            parse_money(bad)
    assert parse_threshold("10%") == 1_000 and parse_threshold("2.5") == 250
    assert parse_threshold("250bps") == 250
    for bad in ("x", "0.001%", "-1"):
        with pytest.raises(click.BadParameter):
            parse_threshold(bad)
