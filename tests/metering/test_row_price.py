"""The ``row`` unit beyond ``/v2``: an endpoint's ``:predict`` call charged per instance
it sends, and the row price shown wherever units are: the price list, usage, the
consumer's invoice line and the publisher's statement line."""

from __future__ import annotations

from typing import Any

from modelport.metering.types import BalanceScope, Unit, UsageStatus
from tests.metering.conftest import Platform
from tests.polling import eventually

TENANT = BalanceScope.TENANT
INSTANCES = [[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0], [9.0, 10.0, 11.0, 12.0]]


def deploy_adder(platform: Platform, endpoint: str) -> None:
    """Endpoint ``endpoint`` of acme serving acme/adder:1, routed by this process."""
    client = platform.client
    created = client.post("/api/endpoints", json={"name": endpoint, "tenant": "acme"})
    assert created.status_code == 201, created.text
    body = {"versions": [{"model": "acme/adder", "version": "1", "weight": 100}]}
    started = client.post(f"/api/endpoints/{endpoint}/deployments", json=body)
    assert started.status_code == 202, started.text
    ident = started.json()["id"]
    router = platform.services.serving.router

    def active() -> bool:
        state = client.get(f"/api/endpoints/{endpoint}/deployments/{ident}").json()["state"]
        route = router.table.find(endpoint)
        return state == "active" and route is not None and route.deployment == ident

    assert eventually(active)


def test_predict_is_charged_per_instance_and_the_row_shows_in_every_document(
    platform: Platform,
) -> None:
    services, client = platform.services, platform.client
    tenancy = services.tenancy
    # An endpoint serves its own tenant's callers: acme's application calls it.
    tenancy.add_member("acme", "app", roles=["consumer"], actor="admin")
    key = tenancy.create_key("acme", "app", name="app", actor="admin").secret
    as_app = {"Authorization": f"Bearer {key}"}
    services.metering.balances.credit(TENANT, "acme", 1_000, tenant="acme")
    rule = platform.price(250, unit="row")
    listed = client.get("/api/prices", params={"model": "acme/adder"}).json()["items"]
    assert [(p["id"], p["unit"], p["unit_price_micros"]) for p in listed] == [
        (rule["id"], "row", 250)
    ]
    deploy_adder(platform, "rows")

    too_many = client.post(
        "/api/endpoints/rows:predict", json={"inputs": {"x": INSTANCES * 2}}, headers=as_app
    )
    assert too_many.status_code == 402, too_many.text  # 6 rows: 1,500 > 1,000
    assert too_many.json()["code"] == "budget_exceeded"
    answer = client.post(
        "/api/endpoints/rows:predict", json={"inputs": {"x": INSTANCES}}, headers=as_app
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["outputs"] == {"y": [[v + 1 for v in row] for row in INSTANCES]}
    metering = services.metering
    if metering.journal is not None:
        assert metering.journal.flush()
    [entry] = platform.entries()  # the refused call left nothing
    event = entry.event
    assert (event.unit, event.quantity, event.status) == (Unit.ROW, 3, UsageStatus.SUCCEEDED)
    assert (event.endpoint, event.amount_micros) == ("rows", 750)
    balance = metering.balances.get(TENANT, "acme")
    assert balance.balance_micros == 250 and balance.reserved_micros == 0

    usage = client.get("/api/usage", params={"tenant": "acme"}).json()["items"]
    assert [(u["unit"], u["quantity"], u["amount_micros"]) for u in usage] == [("row", 3, 750)]
    period = event.finished_at.strftime("%Y-%m")
    generated = client.post("/api/billing/generate", json={"period": period})
    assert generated.status_code == 200, generated.text
    documents: dict[str, Any] = generated.json()
    [invoice] = [i for i in documents["invoices"] if i["tenant"] == "acme"]
    invoice = client.get(f"/api/invoices/{invoice['id']}").json()
    assert [
        (x["unit"], x["quantity"], x["unit_price_micros"], x["amount_micros"])
        for x in invoice["lines"]
    ] == [("row", 3, 250, 750)]
    [statement] = documents["statements"]
    statement = client.get(f"/api/statements/{statement['id']}").json()
    assert statement["publisher"] == "acme"
    assert [(x["unit"], x["quantity"], x["revenue_micros"]) for x in statement["lines"]] == [
        ("row", 3, 750)
    ]
