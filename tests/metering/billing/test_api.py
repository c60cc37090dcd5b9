"""The billing API: who may read and do what across tenants, the invoice lifecycle over
HTTP, the usage CSV export, and audited balance credits."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from starlette.testclient import TestClient

from modelport.api.routes import usage as usage_routes
from modelport.metering.ledger import Ledger
from modelport.metering.types import UsageEvent
from tests.metering.billing.factories import event, price
from tests.tenancy.conftest import ADMIN, World, seed

OCTOBER = datetime(2026, 10, 20, 9, 0, tzinfo=UTC)
"""A closed period: its documents may be finalised now."""


@pytest.fixture
def world(services: Any) -> Iterator[World]:
    from modelport.api import create_app

    with TestClient(create_app(services)) as client:
        yield seed(client, services)


def record(world: World, events: list[UsageEvent], at: datetime = OCTOBER) -> None:
    Ledger(world.services.database, now=lambda: at).record(events)


@pytest.fixture
def billed(world: World) -> dict[str, int]:
    """October's usage of acme and globex calling each other's public models, generated
    into drafts; ids of the documents by name."""
    record(
        world,
        [
            event("acme", "globex/public", "1", snapshot=price(1_000, share_bps=7_000)),
            event("acme", "globex/public", "1", snapshot=price(1_000, share_bps=7_000)),
            event("globex", "acme/public", "1", snapshot=price(2_500, share_bps=5_000)),
            event("acme", "acme/private", "2", snapshot=price(100, share_bps=7_000)),
        ],
    )
    response = world.client.post("/api/billing/generate", json={"period": "2026-10"}, headers=ADMIN)
    assert response.status_code == 200, response.text
    body = response.json()
    ids = {f"invoice:{i['tenant']}": i["id"] for i in body["invoices"]}
    ids |= {f"statement:{s['publisher']}": s["id"] for s in body["statements"]}
    return ids


def test_the_invoice_lifecycle_over_http(world: World, billed: dict[str, int]) -> None:
    client, acme = world.client, billed["invoice:acme"]
    shown = client.get(f"/api/invoices/{acme}", headers=world.key("acme", "billing")).json()
    assert shown["status"] == "draft" and shown["total_micros"] == 2_100
    assert [(x["line"], x["model"], x["amount_micros"]) for x in shown["lines"]] == [
        (1, "acme/private", 100),
        (2, "globex/public", 2_000),
    ]
    assert shown["credit_notes"] == []
    final = client.post(f"/api/invoices/{acme}/finalize", headers=ADMIN)
    assert final.status_code == 200 and final.json()["status"] == "finalized"
    again = client.post(f"/api/invoices/{acme}/finalize", headers=ADMIN)
    assert again.status_code == 409 and again.json()["code"] == "invoice_finalized"
    too_much = client.post(
        f"/api/invoices/{acme}/credit-notes",
        json={
            "reason": "outage",
            "lines": [{"description": "x", "amount_micros": 101, "invoice_line": 1}],
        },
        headers=ADMIN,
    )
    assert too_much.status_code == 409 and too_much.json()["code"] == "credit_exceeds_invoice"
    assert too_much.json()["available_micros"] == 100
    note = client.post(
        f"/api/invoices/{acme}/credit-notes",
        json={
            "reason": "outage",
            "lines": [{"description": "refund", "amount_micros": 100, "invoice_line": 1}],
        },
        headers=ADMIN,
    )
    assert note.status_code == 201, note.text
    assert note.json()["total_micros"] == 100 and note.json()["created_by"] == "admin"
    shown = client.get(f"/api/invoices/{acme}", headers=world.key("acme", "owner")).json()
    assert shown["credited_micros"] == 100 and shown["due_micros"] == 2_000
    assert [n["id"] for n in shown["credit_notes"]] == [note.json()["id"]]
    listed = client.get("/api/invoices", headers=world.key("acme", "billing")).json()["items"]
    assert [(i["id"], i["status"]) for i in listed] == [(acme, "finalized")]
    assert "lines" not in listed[0]
    bad = client.post(
        f"/api/invoices/{acme}/credit-notes",
        json={"reason": "x", "lines": [{"description": "x", "amount_micros": 0}]},
        headers=ADMIN,
    )
    assert bad.status_code in (400, 422)
    recompute = client.get("/api/billing/recompute", params={"period": "2026-10"}, headers=ADMIN)
    assert recompute.json()["clean"] is True and recompute.json()["events"] == 4


def test_statements_over_http(world: World, billed: dict[str, int]) -> None:
    client = world.client
    statement = client.get(
        f"/api/statements/{billed['statement:globex']}", headers=world.key("globex", "owner")
    ).json()
    assert statement["publisher"] == "globex" and statement["revenue_micros"] == 2_000
    assert statement["publisher_share_micros"] == 1_400 and statement["platform_take_micros"] == 600
    [line] = statement["lines"]
    assert line["events"] == 2 and line["revenue_share_bps"] == 7_000
    final = client.post(f"/api/statements/{billed['statement:globex']}/finalize", headers=ADMIN)
    assert final.status_code == 200 and final.json()["status"] == "finalized"
    listed = client.get("/api/statements", headers=world.key("acme", "billing")).json()["items"]
    assert [s["publisher"] for s in listed] == ["acme"]


# Who gets what: 200/201 allowed, 403 may see but not do, 404 may not see.
READERS = {
    ("acme", "owner"): 200,
    ("acme", "billing"): 200,
    ("acme", "consumer"): 403,
    ("acme", "publisher"): 403,
    ("globex", "owner"): 404,
    ("globex", "billing"): 404,
}
ADMIN_ONLY = {
    ("acme", "owner"): 403,
    ("acme", "billing"): 403,
    ("globex", "owner"): 404,
    ("globex", "billing"): 404,
}
PLATFORM = {("acme", "owner"): 403, ("globex", "billing"): 403}


def _routes(ids: dict[str, int]) -> list[tuple[str, str, dict[str, Any] | None, dict, int]]:
    invoice, statement = ids["invoice:acme"], ids["statement:acme"]
    credit = {"reason": "r", "lines": [{"description": "d", "amount_micros": 1}]}
    return [
        ("GET", f"/api/invoices/{invoice}", None, READERS, 200),
        ("GET", f"/api/invoices/{invoice}/credit-notes", None, READERS, 200),
        ("GET", f"/api/statements/{statement}", None, READERS, 200),
        ("GET", "/api/balances/acme", None, READERS, 200),
        ("GET", "/api/invoices?tenant=acme", None, READERS, 200),
        ("GET", "/api/statements?publisher=acme", None, READERS, 200),
        ("GET", "/api/usage?tenant=acme", None, READERS, 200),
        ("POST", f"/api/invoices/{invoice}/finalize", None, ADMIN_ONLY, 200),
        ("POST", f"/api/invoices/{invoice}/credit-notes", credit, ADMIN_ONLY, 201),
        ("POST", f"/api/statements/{statement}/finalize", None, ADMIN_ONLY, 200),
        ("POST", "/api/balances/acme/credits", {"amount_micros": 5}, ADMIN_ONLY, 201),
        ("POST", "/api/billing/generate", {"period": "2026-10"}, PLATFORM, 200),
        ("GET", "/api/billing/recompute?period=2026-10", None, PLATFORM, 200),
        ("GET", "/api/billing/reconciliation?period=2026-10", None, PLATFORM, 200),
    ]


def test_every_billing_route_across_tenants(world: World, billed: dict[str, int]) -> None:
    client = world.client
    for method, path, body, expected, admin_status in _routes(billed):
        for (tenant, role), status in expected.items():
            response = client.request(method, path, json=body, headers=world.key(tenant, role))
            assert response.status_code == status, (method, path, tenant, role, response.text)
        assert client.request(method, path, json=body).status_code == 401
        response = client.request(method, path, json=body, headers=ADMIN)
        assert response.status_code == admin_status, (method, path, response.text)


def test_unknown_and_foreign_documents_look_the_same(world: World, billed: dict[str, int]) -> None:
    globex = world.key("globex", "owner")
    foreign = world.client.get(f"/api/invoices/{billed['invoice:acme']}", headers=globex)
    missing = world.client.get("/api/invoices/999999", headers=globex)
    assert foreign.status_code == missing.status_code == 404
    assert foreign.json()["code"] == missing.json()["code"] == "invoice_not_found"


def test_balance_credits_are_admin_only_and_audited(world: World) -> None:
    client = world.client
    denied = client.post(
        "/api/balances/acme/credits", json={"amount_micros": 10}, headers=world.key("acme", "owner")
    )
    assert denied.status_code == 403
    credited = client.post(
        "/api/balances/acme/credits",
        json={"amount_micros": 5_000_000, "reason": "prepaid, order 42"},
        headers=ADMIN | {"X-Request-Id": "credit-1"},
    )
    assert credited.status_code == 201, credited.text
    assert credited.json()["balance_micros"] == 5_000_000
    client.post("/api/balances/acme/credits", json={"amount_micros": 1}, headers=ADMIN)
    shown = client.get("/api/balances/acme", headers=world.key("acme", "billing")).json()
    [balance] = shown["items"]
    assert balance["scope"] == "tenant" and balance["balance_micros"] == 5_000_001
    assert balance["available_micros"] == 5_000_001
    events = client.get(
        "/api/audit", params={"action": "balances.credit"}, headers=world.key("acme", "owner")
    ).json()["items"]
    by_outcome = {(e["actor"], e["outcome"]): e for e in events}
    assert set(by_outcome) == {("admin", "success"), ("acme/owner", "denied")}
    first = next(e for e in events if e["request_id"] == "credit-1")
    assert first["tenant"] == "acme" and first["status"] == 201
    assert first["reason"] == "credit of 5000000 micro-units: prepaid, order 42"
    for bad in ({"amount_micros": 0}, {"amount_micros": -5}, {"amount_micros": 10**16}, {}):
        assert client.post("/api/balances/acme/credits", json=bad, headers=ADMIN).status_code in (
            400,
            422,
        )
    assert (
        client.post(
            "/api/balances/nobody/credits", json={"amount_micros": 1}, headers=ADMIN
        ).status_code
        == 404
    )


def _csv_rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def test_usage_as_json_pages_and_as_streamed_csv(
    world: World, billed: dict[str, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    client, billing = world.client, world.key("acme", "billing")
    record(world, [event("acme", "globex/public", request_id='=HYPERLINK("x")')])
    first = client.get("/api/usage", params={"limit": 2, "period": "2026-10"}, headers=billing)
    assert first.status_code == 200
    page = first.json()
    assert [e["tenant"] for e in page["items"]] == ["acme", "acme"]
    rest = client.get(
        "/api/usage",
        params={"limit": 2, "period": "2026-10", "cursor": page["next_cursor"]},
        headers=billing,
    ).json()
    assert rest["next_cursor"] is None and len(rest["items"]) == 2
    items = page["items"] + rest["items"]
    assert [e["seq"] for e in items] == sorted(e["seq"] for e in items)

    monkeypatch.setattr(usage_routes, "CSV_BATCH", 2)  # several batches, several chunks
    for request in (
        {"params": {"format": "csv", "period": "2026-10"}, "headers": billing},
        {"params": {"period": "2026-10"}, "headers": billing | {"Accept": "text/csv"}},
    ):
        exported = client.get("/api/usage", **request)
        assert exported.status_code == 200
        assert exported.headers["content-type"] == "text/csv; charset=utf-8"
        assert (
            exported.headers["content-disposition"]
            == 'attachment; filename="usage-acme-2026-10.csv"'
        )
        rows = _csv_rows(exported.text)
        assert [r["event_id"] for r in rows] == [e["event_id"] for e in items]
        assert list(rows[0]) == list(usage_routes.USAGE_COLUMNS)
        assert rows[-1]["request_id"] == '\'=HYPERLINK("x")'  # not a live formula
    model_only = client.get(
        "/api/usage", params={"format": "csv", "model": "acme/private"}, headers=billing
    )
    assert [r["model"] for r in _csv_rows(model_only.text)] == ["acme/private"]
    everyone = _csv_rows(client.get("/api/usage?format=csv&period=2026-10", headers=ADMIN).text)
    assert {r["tenant"] for r in everyone} == {"acme", "globex"}
    # A period's CSV adds up to its invoices.
    invoice = client.get(f"/api/invoices/{billed['invoice:acme']}", headers=billing).json()
    acme_rows = [r for r in everyone if r["tenant"] == "acme"]
    assert sum(int(r["amount_micros"]) for r in acme_rows) == invoice["total_micros"] + 1_000
    for bad in ({"period": "2026-13"}, {"cursor": "x"}, {"format": "xml"}):
        assert client.get("/api/usage", params=bad, headers=billing).status_code in (400, 422)


def test_the_csv_file_name_is_made_of_safe_characters(world: World) -> None:
    """The admin names any tenant; the download's file name (a response header) must
    still encode, and carry no quote or line break of the caller's."""
    for tenant, name in (
        ("\U000e8ff7ü", "usage-__-all.csv"),
        ('a"b\r\nSet-Cookie: x', "usage-a_b__Set-Cookie__x-all.csv"),
    ):
        exported = world.client.get(
            "/api/usage", params={"format": "csv", "tenant": tenant}, headers=ADMIN
        )
        assert exported.status_code == 200, exported.text
        assert exported.headers["content-disposition"] == f'attachment; filename="{name}"'
        assert "set-cookie" not in exported.headers


def test_reconciliation_over_http(world: World) -> None:
    report = world.client.get(
        "/api/billing/reconciliation",
        params={"period": "2026-10", "threshold_bps": 500},
        headers=ADMIN,
    )
    assert report.status_code == 200
    assert report.json() == {
        "period": "2026-10",
        "threshold_bps": 500,
        "flagged": False,
        "tenants": [],
        "findings": [],
    }
