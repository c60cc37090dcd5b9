"""/api/webhooks: the signing secret (shown once), the delivery log, redelivery; a
tenant sees only its own deliveries (another's answer the 404 of a missing one)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from modelport.api import create_app
from modelport.app import Services, build_services, build_webhooks
from modelport.clock import ManualClock
from modelport.config import Settings
from modelport.store import Database
from modelport.store.secrets import SecretBox
from tests.conftest import ADMIN_KEY, TEST_SECRET_KEY
from tests.webhooks.conftest import Receiver, verify

EVENT = {"job": "job_1", "state": "succeeded"}


@pytest.fixture
def api_settings(tmp_path: Path, database_url: str, receiver: Receiver) -> Settings:
    return Settings(
        home=tmp_path / "home",
        database_url=database_url,
        admin_key=ADMIN_KEY,
        auto_migrate=database_url.startswith("sqlite"),
        webhook_allow_hosts=(receiver.host,),
        webhook_secret_overlap_seconds=120,
    )


@pytest.fixture
def wired(api_settings: Settings, clock: ManualClock) -> Iterator[Services]:
    services = build_services(api_settings, clock=clock)
    for tenant in ("acme", "globex"):
        services.tenancy.create_tenant(tenant, actor="admin")
        for role in ("owner", "consumer", "publisher"):
            services.tenancy.add_member(tenant, role, roles=[role], actor="admin")
    yield services
    services.close()


@pytest.fixture
def api(wired: Services) -> TestClient:
    """Without its lifespan: the deliverer runs only when a test drains it."""
    return TestClient(create_app(wired))


def key(services: Services, tenant: str, member: str) -> dict[str, str]:
    issued = services.tenancy.create_key(tenant, member, name="test", actor="admin")
    return {"Authorization": f"Bearer {issued.secret}"}


ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}


def test_the_secret_is_shown_only_when_made_or_rotated(
    api: TestClient, wired: Services, receiver: Receiver
) -> None:
    owner = key(wired, "acme", "owner")
    missing = api.get("/api/webhooks/secret", headers=owner)
    assert missing.status_code == 404
    assert missing.json()["code"] == "webhook_secret_not_found"

    made = api.post("/api/webhooks/secret", headers=owner)
    assert made.status_code == 201, made.text
    assert made.headers["cache-control"] == "no-store"
    first = made.json()["secret"]
    assert first.startswith("whsec_")
    shown = api.get("/api/webhooks/secret", headers=owner).json()
    assert "secret" not in shown and first not in str(shown)
    assert shown["tenant"] == "acme" and shown["signing_secrets"] == 1

    rotated = api.post("/api/webhooks/secret", headers=owner)
    assert rotated.status_code == 200
    second = rotated.json()["secret"]
    assert second != first
    assert rotated.json()["signing_secrets"] == 2
    assert rotated.json()["previous_valid_until"] is not None

    wired.webhooks.enqueue("acme", receiver.url, "job.succeeded", EVENT, "job_1")
    wired.webhooks.drain()
    verify(first, receiver.requests[-1])
    verify(second, receiver.requests[-1])


def test_who_may_see_and_rotate_the_secret(api: TestClient, wired: Services) -> None:
    consumer = key(wired, "acme", "consumer")
    assert api.post("/api/webhooks/secret", headers=consumer).status_code == 403
    assert api.get("/api/webhooks/secret", headers=consumer).status_code == 404  # none yet
    other = key(wired, "globex", "owner")
    refused = api.post("/api/webhooks/secret", params={"tenant": "acme"}, headers=other)
    assert refused.status_code == 404
    assert refused.json()["code"] == "tenant_not_found"
    nameless = api.post("/api/webhooks/secret", headers=ADMIN)
    assert nameless.status_code == 400
    assert nameless.json()["code"] == "tenant_required"
    ghost = api.post("/api/webhooks/secret", params={"tenant": "ghost"}, headers=ADMIN)
    assert ghost.status_code == 404 and ghost.json()["code"] == "tenant_not_found"
    made = api.post("/api/webhooks/secret", params={"tenant": "acme"}, headers=ADMIN)
    assert made.status_code == 201
    assert api.get("/api/webhooks/secret", headers=consumer).status_code == 200


def test_the_delivery_log_and_redelivery(
    api: TestClient, wired: Services, receiver: Receiver, clock: ManualClock
) -> None:
    consumer = key(wired, "acme", "consumer")
    receiver.fail_first = 1
    delivery_id = wired.webhooks.enqueue("acme", receiver.url, "job.succeeded", EVENT, "job_1")
    wired.webhooks.drain()
    wired.webhooks.enqueue("acme", receiver.url, "job.succeeded", EVENT, "job_2")

    listed = api.get("/api/webhooks/deliveries", params={"subject": "job_1"}, headers=consumer)
    assert listed.status_code == 200, listed.text
    [item] = listed.json()["items"]
    assert item["id"] == delivery_id and item["status"] == "pending"
    assert item["attempts"] == 1 and item["last_status_code"] == 500

    early = api.post(f"/api/webhooks/deliveries/{delivery_id}:redeliver", headers=consumer)
    assert early.status_code == 409
    assert early.json()["code"] == "webhook_delivery_pending"

    clock.advance(5)
    wired.webhooks.drain()
    shown = api.get(f"/api/webhooks/deliveries/{delivery_id}", headers=consumer).json()
    assert shown["status"] == "delivered"
    assert [a["status_code"] for a in shown["attempts_log"]] == [500, 204]
    assert all(a["attempted_at"] and a["duration_ms"] >= 0 for a in shown["attempts_log"])

    again = api.post(f"/api/webhooks/deliveries/{delivery_id}:redeliver", headers=consumer)
    assert again.status_code == 202, again.text
    assert again.json()["message_id"] == shown["message_id"]
    assert again.json()["redelivery_of"] == delivery_id
    wired.webhooks.drain()
    assert receiver.requests[-1].headers["webhook-id"] == shown["message_id"]

    pages, cursor = [], None
    while True:
        params = {"limit": 1, **({"cursor": cursor} if cursor else {})}
        page = api.get("/api/webhooks/deliveries", params=params, headers=consumer).json()
        pages += [d["id"] for d in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert len(pages) == 3 and again.json()["id"] in pages
    delivered = api.get(
        "/api/webhooks/deliveries", params={"status": "delivered"}, headers=consumer
    ).json()["items"]
    assert len(delivered) == 3
    bad = api.get("/api/webhooks/deliveries", params={"cursor": "zz"}, headers=consumer)
    assert bad.status_code == 400 and bad.json()["code"] == "invalid_cursor"


def test_a_tenant_never_sees_another_tenants_deliveries(
    api: TestClient, wired: Services, receiver: Receiver
) -> None:
    delivery_id = wired.webhooks.enqueue("acme", receiver.url, "job.succeeded", EVENT, "job_1")
    wired.webhooks.drain()
    other = key(wired, "globex", "owner")
    for response in (
        api.get(f"/api/webhooks/deliveries/{delivery_id}", headers=other),
        api.post(f"/api/webhooks/deliveries/{delivery_id}:redeliver", headers=other),
        api.get("/api/webhooks/deliveries/nope", headers=other),
    ):
        assert response.status_code == 404
        assert response.json()["code"] == "webhook_delivery_not_found"
    assert api.get("/api/webhooks/deliveries", headers=other).json()["items"] == []
    peek = api.get("/api/webhooks/deliveries", params={"tenant": "acme"}, headers=other)
    assert peek.status_code == 404
    # the admin names the tenant
    as_admin = api.get("/api/webhooks/deliveries", params={"tenant": "acme"}, headers=ADMIN)
    assert [d["id"] for d in as_admin.json()["items"]] == [delivery_id]
    assert api.get(f"/api/webhooks/deliveries/{delivery_id}", headers=ADMIN).status_code == 200
    # a member that may not submit work may not read the log
    publisher = key(wired, "acme", "publisher")
    assert api.get("/api/webhooks/deliveries", headers=publisher).status_code == 403
    assert api.get(f"/api/webhooks/deliveries/{delivery_id}", headers=publisher).status_code == 403
    assert len(receiver.requests) == 1


def test_the_running_application_delivers_in_the_background(
    wired: Services, receiver: Receiver
) -> None:
    with TestClient(create_app(wired)):  # its lifespan starts the deliverer
        wired.webhooks.enqueue("acme", receiver.url, "job.succeeded", EVENT, "job_1")
        deadline = time.monotonic() + 30
        while not receiver.requests:
            assert time.monotonic() < deadline, "no delivery"
            time.sleep(0.02)
    [page_item] = wired.webhooks.deliveries("acme").items
    assert page_item.status.value in ("delivered", "pending")  # recorded just after the post


def test_a_lease_no_longer_than_an_attempt_is_refused(
    tmp_path: Path, database: Database, clock: ManualClock
) -> None:
    settings = Settings(home=tmp_path, webhook_lease_seconds=10, webhook_timeout_seconds=10)
    with pytest.raises(ValueError, match="LEASE"):
        build_webhooks(settings, database, clock, SecretBox([TEST_SECRET_KEY]))
