"""``GET /api/revenue``: a publisher's calls and revenue by day, model and version,
from the ledger before any statement exists, read only by the publisher's owners and
billing members (and the platform admin)."""

from __future__ import annotations

from datetime import UTC, datetime

from modelport.metering.billing.service import BillingService
from modelport.metering.types import Unit
from tests.metering.billing.factories import event, price
from tests.metering.billing.test_api import record, world
from tests.tenancy.conftest import ADMIN, World

__all__ = ["world"]

OCT_20 = datetime(2026, 10, 20, 9, 0, tzinfo=UTC)
OCT_21 = datetime(2026, 10, 21, 23, 59, tzinfo=UTC)
NOV_1 = datetime(2026, 11, 1, 0, 0, tzinfo=UTC)


def _usage(world: World) -> None:
    """globex calls acme's model on two October days (two versions) and once in
    November; acme calls globex's model (globex's revenue, not acme's)."""
    at_7000 = price(1_001, share_bps=7_000)
    record(world, [event("globex", "acme/public", "1", snapshot=at_7000)], OCT_20)
    record(world, [event("globex", "acme/public", "1", snapshot=at_7000)], OCT_20)
    record(world, [event("globex", "acme/public", "2", snapshot=at_7000)], OCT_21)
    record(world, [event("globex", "acme/public", "2", snapshot=at_7000)], NOV_1)
    record(world, [event("acme", "globex/public", "1", snapshot=price(500))], OCT_20)


def test_a_publisher_reads_its_calls_and_revenue_by_day_and_version(world: World) -> None:
    _usage(world)
    answer = world.client.get(
        "/api/revenue", params={"period": "2026-10"}, headers=world.key("acme", "billing")
    )
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["publisher"] == "acme" and body["period"] == "2026-10"
    rows = [
        (x["day"], x["model"], x["version"], x["events"], x["revenue_micros"])
        for x in body["items"]
    ]
    assert rows == [
        ("2026-10-20", "acme/public", "1", 2, 2_002),
        ("2026-10-21", "acme/public", "2", 1, 1_001),
    ]
    # Each event's share is rounded down on its own, as a statement line's is.
    assert [x["publisher_share_micros"] for x in body["items"]] == [1_400, 700]
    assert (body["events"], body["revenue_micros"], body["publisher_share_micros"]) == (
        3,
        3_003,
        2_100,
    )
    one = world.client.get(
        "/api/revenue",
        params={"period": "2026-10", "model": "acme/public", "version": "2"},
        headers=world.key("acme", "owner"),
    ).json()
    assert [(x["day"], x["events"]) for x in one["items"]] == [("2026-10-21", 1)]


def test_a_call_priced_by_two_units_is_one_call_of_two_lines(world: World) -> None:
    """A chat is charged its input and its output tokens: two ledger lines, one call."""
    tokens = price(10)
    lines = [
        event("globex", "acme/chat", "1", unit=unit, quantity=5, snapshot=tokens, prediction_id=p)
        for p in ("chat-1", "chat-2")
        for unit in (Unit.INPUT_TOKEN, Unit.OUTPUT_TOKEN)
    ]
    record(world, lines, OCT_20)
    body = world.client.get(
        "/api/revenue", params={"period": "2026-10"}, headers=world.key("acme", "owner")
    ).json()
    assert (body["calls"], body["events"]) == (2, 4)
    assert [(x["calls"], x["events"]) for x in body["items"]] == [(2, 4)]


def test_the_days_add_up_to_the_periods_statement(world: World) -> None:
    _usage(world)
    generated = world.client.post(
        "/api/billing/generate", json={"period": "2026-10"}, headers=ADMIN
    ).json()
    [statement] = [s for s in generated["statements"] if s["publisher"] == "acme"]
    body = world.client.get(
        "/api/revenue", params={"period": "2026-10"}, headers=world.key("acme", "owner")
    ).json()
    assert body["revenue_micros"] == statement["revenue_micros"]
    assert body["publisher_share_micros"] == statement["publisher_share_micros"]
    assert body["events"] == statement["events"]


def test_other_tenants_and_members_without_billing_are_refused(world: World) -> None:
    _usage(world)
    client = world.client
    for tenant, role, status in [
        ("globex", "owner", 404),
        ("globex", "billing", 404),
        ("acme", "consumer", 403),
        ("acme", "publisher", 403),
    ]:
        refused = client.get(
            "/api/revenue", params={"publisher": "acme"}, headers=world.key(tenant, role)
        )
        assert refused.status_code == status, (tenant, role, refused.text)
    foreign = client.get(
        "/api/revenue", params={"publisher": "acme"}, headers=world.key("globex", "owner")
    )
    assert foreign.json()["code"] == "tenant_not_found"
    # globex's own revenue holds only calls to globex's models.
    own = client.get(
        "/api/revenue", params={"period": "2026-10"}, headers=world.key("globex", "owner")
    ).json()
    assert [x["model"] for x in own["items"]] == ["globex/public"]
    assert client.get("/api/revenue").status_code == 401
    admin = client.get(
        "/api/revenue", params={"publisher": "acme", "period": "2026-10"}, headers=ADMIN
    )
    assert admin.status_code == 200 and admin.json()["events"] == 3


def test_a_bad_period_is_refused_with_its_code(world: World) -> None:
    for bad in ("2026-13", "October", "2026-1"):
        answer = world.client.get(
            "/api/revenue", params={"period": bad}, headers=world.key("acme", "owner")
        )
        assert answer.status_code == 400, (bad, answer.text)
        assert answer.json()["code"] == "invalid_period"


def test_the_period_defaults_to_the_current_one(world: World) -> None:
    now = world.services.clock.now()
    body = world.client.get("/api/revenue", headers=world.key("acme", "owner")).json()
    assert body["period"] == f"{now.year:04d}-{now.month:02d}" and body["items"] == []


def test_the_service_sums_every_publisher_when_none_is_named(world: World) -> None:
    _usage(world)
    billing: BillingService = world.services.billing
    days = billing.revenue(None, "2026-10")
    assert sorted({d.model for d in days}) == ["acme/public", "globex/public"]
