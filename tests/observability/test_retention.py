"""The prediction log's retention: each tenant's records are kept its days (90 by
default), the sweep deletes what is older with the outcomes recorded against it, and a
tenant's records can be deleted now (the right to deletion), on both databases."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import func, select
from starlette.testclient import TestClient

from modelport.app import Services
from modelport.observability.prediction_store import PredictionRepository
from modelport.observability.retention import (
    SWEEP_ACTION,
    SWEEP_ACTOR,
    PredictionRetention,
    audit_sweeps,
)
from modelport.observability.types import PredictionRecord
from modelport.store.tables import PredictionOutcomeRow, PredictionRow
from modelport.tenancy.types import AuditQuery
from tests.conftest import ensure_tenant
from tests.polling import eventually

NOW = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)


def record(ident: str, owner: str, tenant: str, days_ago: float) -> PredictionRecord:
    return PredictionRecord(
        id=ident,
        endpoint=f"{owner}-e",
        owner=owner,
        model=f"{owner}/m",
        version="1",
        backend="local",
        received_at=NOW - timedelta(days=days_ago),
        latency_seconds=0.01,
        tenant=tenant,
    )


def kept(services: Services) -> set[str]:
    with services.database.transaction() as session:
        return set(session.scalars(select(PredictionRow.id)))


def outcomes(services: Services) -> int:
    with services.database.transaction() as session:
        return int(session.scalar(select(func.count()).select_from(PredictionOutcomeRow)) or 0)


@pytest.fixture
def logged(services: Services) -> Services:
    PredictionRepository(services.database).insert(
        [
            record("acme-new", "acme", "beta", 10),
            record("acme-old", "acme", "beta", 40),
            record("globex-new", "globex", "acme", 80),
            record("globex-old", "globex", "beta", 100),
            record("nobody-old", "", "beta", 100),
        ]
    )
    with services.database.transaction() as session:
        session.add(PredictionOutcomeRow(prediction_id="acme-old", label="fraud", recorded_by="t"))
        session.add(PredictionOutcomeRow(prediction_id="acme-new", label="ok", recorded_by="t"))
    return services


def test_the_sweep_keeps_each_owners_days_or_the_default(logged: Services) -> None:
    retention = PredictionRetention(
        logged.database, default_days=90, now=lambda: NOW, audit=audit_sweeps(logged.database)
    )
    retention.set_days("acme", 30, actor="test")
    assert retention.days_of("acme") == (30, True)
    assert retention.days_of("globex") == (90, False)
    assert retention.sweep() == 3
    assert kept(logged) == {"acme-new", "globex-new"}
    assert outcomes(logged) == 1  # the deleted prediction's outcome went with it
    # One audit event per owner whose records went, saying how many after how long.
    swept = logged.tenancy.audit_log(AuditQuery(action=SWEEP_ACTION)).items
    assert {(e.tenant, e.actor, e.reason) for e in swept} == {
        ("acme", SWEEP_ACTOR, "retention of 30 days erased 1 predictions"),
        ("globex", SWEEP_ACTOR, "retention of 90 days erased 1 predictions"),
    }
    assert retention.sweep() == 0
    assert len(logged.tenancy.audit_log(AuditQuery(action=SWEEP_ACTION)).items) == 2
    retention.set_days("acme", None, actor="test")  # back to the default
    assert retention.days_of("acme") == (90, False)


def test_a_tenants_records_are_forgotten_whichever_endpoint_logged_them(
    logged: Services,
) -> None:
    retention = PredictionRetention(logged.database, default_days=90, now=lambda: NOW)
    assert retention.forget("beta") == 4
    assert kept(logged) == {"globex-new"}  # acme's own call to globex's endpoint
    assert outcomes(logged) == 0
    assert retention.forget("beta") == 0


def test_the_retention_routes(logged: Services, client: TestClient) -> None:
    # The serving process's sweep (started with the application, the system clock's
    # today being after NOW) takes the records past the 90 days of the default.
    assert eventually(lambda: kept(logged) == {"acme-new", "acme-old", "globex-new"})
    for slug in ("acme", "beta"):
        ensure_tenant(client, slug)
    assert client.get("/api/tenants/acme/retention").json() == {
        "tenant": "acme",
        "days": 90,
        "default": True,
    }
    changed = client.put("/api/tenants/acme/retention", json={"days": 30})
    assert changed.status_code == 200, changed.text
    assert changed.json() == {"tenant": "acme", "days": 30, "default": False}
    for bad in (0, 3651, -5):
        refused = client.put("/api/tenants/acme/retention", json={"days": bad})
        assert refused.status_code == 400 and refused.json()["code"] == "invalid_retention"
    assert client.put("/api/tenants/acme/retention", json={"days": "x"}).status_code in (400, 422)
    assert client.get("/api/tenants/nobody/retention").status_code == 404
    forgotten = client.delete("/api/tenants/beta/predictions")
    assert forgotten.json() == {"tenant": "beta", "deleted": 2}
    assert kept(logged) == {"globex-new"}
    reset = client.put("/api/tenants/acme/retention", json={"days": None})
    assert reset.json()["default"] is True


def test_another_tenants_member_cannot_see_or_delete(logged: Services, client: TestClient) -> None:
    for slug in ("acme", "beta"):
        ensure_tenant(client, slug)
    tenancy = logged.tenancy
    tenancy.add_member("acme", "ann", roles=["owner"], actor="admin")
    key = tenancy.create_key("acme", "ann", name="k", actor="admin").secret
    as_acme = {"Authorization": f"Bearer {key}"}
    assert client.get("/api/tenants/acme/retention", headers=as_acme).status_code == 200
    assert client.get("/api/tenants/beta/retention", headers=as_acme).status_code == 404
    assert client.delete("/api/tenants/beta/predictions", headers=as_acme).status_code == 404
    assert {"acme-new", "acme-old", "globex-new"} <= kept(logged)
