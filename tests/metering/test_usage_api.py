"""POST /api/usage/events (reported usage, CloudEvents aliases, idempotent) and
/api/prices (publishers price their own models). Who may report what is in
``test_usage_authorizations``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from modelport.metering.types import BalanceScope, Unit, UsageStatus
from tests.metering.conftest import Platform


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


def reporter(platform: Platform, tenant: str = "acme") -> str:
    """A service account of ``tenant`` whose key may only report usage."""
    tenancy = platform.services.tenancy
    tenancy.add_member(tenant, "backend", roles=["owner"], actor="admin", kind="service_account")
    return tenancy.create_key(
        tenant, "backend", name="report", actor="admin", scopes=["usage.report"]
    ).secret


def mandate(platform: Platform, cap_micros: int = 1_000_000, **fields: Any) -> dict[str, Any]:
    """Tenant beta authorizes acme to report its usage, up to ``cap_micros`` (made by the
    platform admin on beta's behalf)."""
    body = {"consumer": "beta", "publisher": "acme", "cap_micros": cap_micros, **fields}
    response = platform.client.post("/api/usage/authorizations", json=body)
    assert response.status_code == 201, response.text
    return response.json()


SOON = (datetime.now(UTC) + timedelta(days=1)).replace(microsecond=0)
"""When the reported calls happened: after any price rule a test adds now."""


def cloud_event(event_id: str, **data: Any) -> dict[str, Any]:
    return {
        "specversion": "1.0",
        "id": event_id,
        "source": "https://backends.example/gpu-7",
        "type": "dev.modelport.usage",
        "time": SOON.isoformat().replace("+00:00", "Z"),
        "data": {
            "tenant": "beta",
            "model": "acme/adder",
            "version": "1",
            "unit": "output_token",
            "quantity": 1200,
            "wall_ms": 3000,
            **data,
        },
    }


def test_cloudevents_batch_is_recorded_once_and_charged_once(platform: Platform) -> None:
    metering = platform.services.metering
    metering.balances.credit(BalanceScope.TENANT, "beta", 100_000, tenant="beta")
    rule = platform.price(3, unit="output_token", per_units=1, effective_from=None)
    key = reporter(platform)
    mandate(platform)
    batch = [cloud_event("ce-1"), cloud_event("ce-2", quantity=10, status="failed")]
    first = platform.client.post("/api/usage/events", json=batch, headers=bearer(key))
    assert first.status_code == 200, first.text
    assert first.json() == {"accepted": 2, "inserted": ["ce-1", "ce-2"], "duplicates": []}
    again = platform.client.post(
        "/api/usage/events", json={"events": batch[::-1]}, headers=bearer(key)
    )
    assert again.json() == {"accepted": 2, "inserted": [], "duplicates": ["ce-2", "ce-1"]}
    ledger = metering.ledger
    assert ledger.count() == 2
    event = ledger.get("ce-1").event  # type: ignore[union-attr]
    digest = platform.services.registry.get_version("acme", "adder", "1").manifest_digest
    assert event.source == "https://backends.example/gpu-7"
    assert event.finished_at == SOON
    assert event.started_at == SOON - timedelta(seconds=3)
    assert (event.unit, event.quantity, event.status) == (
        Unit.OUTPUT_TOKEN,
        1200,
        UsageStatus.SUCCEEDED,
    )
    assert event.manifest_digest == digest and event.price.rule_id == rule["id"]
    assert event.amount_micros == 3_600 and event.reservation_id is None
    failed = ledger.get("ce-2").event  # type: ignore[union-attr]
    assert failed.status is UsageStatus.FAILED and failed.amount_micros == 0  # rule: none
    balance = metering.balances.get(BalanceScope.TENANT, "beta")
    assert balance.balance_micros == 100_000 - 3_600


def test_plain_fields_are_accepted_too(platform: Platform) -> None:
    doc = {
        "event_id": "plain-1",
        "tenant": "beta",
        "model": "acme/adder",
        "version": "1",
        "unit": "prediction",
        "quantity": 1,
        "started_at": "2026-12-01T12:00:00+00:00",
        "finished_at": "2026-12-01T12:00:01+00:00",
        "compute_ms": 12.5,
        "request_id": "r-1",
    }
    response = platform.client.post("/api/usage/events", json=[doc])
    assert response.status_code == 200 and response.json()["inserted"] == ["plain-1"]
    event = platform.services.metering.ledger.get("plain-1").event  # type: ignore[union-attr]
    assert event.compute_ms == 12.5 and event.source == "external"


def test_a_malformed_event_refuses_the_whole_batch(platform: Platform) -> None:
    good = cloud_event("ok")
    for bad, message in [
        (cloud_event("x", quantity=-1), "quantity"),
        (cloud_event("x", unit="furlong"), "furlong"),
        (cloud_event("x", unit=None), "'unit' is required"),
        (cloud_event("x", model="acme/missing"), "not a known version"),
        ({**cloud_event("x"), "time": "yesterday"}, "RFC 3339"),
        ({"data": {"tenant": "beta"}}, "'id' is required"),
    ]:
        response = platform.client.post("/api/usage/events", json=[good, bad])
        assert response.status_code == 400, response.text
        assert response.json()["code"] == "invalid_usage_event"
        assert message in response.json()["detail"] and response.json()["index"] == 1
    assert platform.client.post("/api/usage/events", content=b"{").status_code == 400
    assert platform.services.metering.ledger.count() == 0


def test_who_may_report_usage(platform: Platform) -> None:
    key = reporter(platform)
    consumer = platform.client.post(
        "/api/usage/events", json=[cloud_event("c")], headers=bearer(platform.key)
    )
    assert consumer.status_code == 403
    platform.services.tenancy.create_tenant("gamma", actor="admin")
    foreign = reporter(platform, "gamma")  # may report, but not for acme's models
    refused = platform.client.post(
        "/api/usage/events", json=[cloud_event("f")], headers=bearer(foreign)
    )
    assert refused.status_code == 403 and "publisher" in refused.json()["detail"]
    mandate(platform)  # beta lets acme report its usage
    own = platform.client.post("/api/usage/events", json=[cloud_event("o")], headers=bearer(key))
    assert own.status_code == 200
    assert platform.services.metering.ledger.count() == 1


def test_publishers_price_their_models_and_callers_read_the_prices(platform: Platform) -> None:
    tenancy = platform.services.tenancy
    tenancy.add_member("acme", "pub", roles=["publisher"], actor="admin")
    pub = tenancy.create_key("acme", "pub", name="k", actor="admin").secret
    body = {"model": "acme/adder", "version": "1", "unit": "prediction", "unit_price_micros": 900}
    created = platform.client.post("/api/prices", json=body, headers=bearer(pub))
    assert created.status_code == 201, created.text
    assert created.json()["revenue_share_bps"] == 7000 and created.json()["created_by"]
    share = platform.client.post(
        "/api/prices", json={**body, "revenue_share_bps": 9000}, headers=bearer(pub)
    )
    assert share.status_code == 403  # only the platform sets revenue shares
    caller = platform.client.post("/api/prices", json=body, headers=bearer(platform.key))
    assert caller.status_code == 403  # beta may call acme/adder, not price it
    unknown = platform.client.post(
        "/api/prices", json={**body, "version": "9"}, headers=bearer(pub)
    )
    assert unknown.status_code == 404
    past = platform.client.post(
        "/api/prices",
        json={**body, "effective_from": "2020-01-01T00:00:00Z"},
        headers=bearer(pub),
    )
    assert past.status_code == 400 and past.json()["code"] == "invalid_price"
    listed = platform.client.get("/api/prices?model=acme/adder", headers=bearer(platform.key))
    assert listed.status_code == 200
    assert [p["unit_price_micros"] for p in listed.json()["items"]] == [900]
    hidden = platform.client.get("/api/prices?model=acme/secret", headers=bearer(platform.key))
    assert hidden.status_code == 404
