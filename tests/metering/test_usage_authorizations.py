"""Who may report usage (POST /api/usage/events): a publisher reports usage of its own
models only when the consumer is tied to it, by a call the platform routed (its call
id) or by the consumer's usage authorization (/api/usage/authorizations); both bound
what may be reported, and a refused batch leaves nothing behind."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

from modelport.errors import Forbidden
from modelport.metering.types import BalanceScope, Reporter, Unit
from tests.metering.conftest import Platform
from tests.metering.test_usage_api import SOON, bearer, cloud_event, reporter

EVENTS = "/api/usage/events"
MANDATES = "/api/usage/authorizations"


def member_key(platform: Platform, tenant: str, role: str) -> str:
    """A key of a new member of ``tenant`` holding ``role``."""
    tenancy = platform.services.tenancy
    tenancy.add_member(tenant, f"{role}-1", roles=[role], actor="admin")
    return tenancy.create_key(tenant, f"{role}-1", name="k", actor="admin").secret


def balance(platform: Platform, tenant: str = "beta") -> int:
    return platform.services.metering.balances.get(BalanceScope.TENANT, tenant).balance_micros


def report(platform: Platform, key: str, *events: dict[str, Any]) -> Any:
    return platform.client.post(EVENTS, json=list(events), headers=bearer(key))


def priced(platform: Platform, micros: int = 3) -> None:
    """acme/adder's output tokens cost ``micros`` each; beta has 1,000,000 prepaid."""
    platform.price(micros, unit="output_token")
    platform.services.metering.balances.credit(
        BalanceScope.TENANT, "beta", 1_000_000, tenant="beta"
    )


def test_usage_forged_against_another_tenant_is_refused(platform: Platform) -> None:
    """The first attack: beta's owner names acme and acme's private model at the top
    level, with an empty ``data``; the check used to read ``data`` only."""
    platform.publisher.adder("acme/secret")
    platform.price(5, model="acme/secret", unit="output_token")
    metering = platform.services.metering
    metering.balances.credit(BalanceScope.TENANT, "acme", 100_000, tenant="acme")
    owner = member_key(platform, "beta", "owner")
    forged = {
        "id": "forged-1",
        "tenant": "acme",
        "model": "acme/secret",
        "version": "1",
        "unit": "output_token",
        "quantity": 10_000,
        "time": SOON.isoformat(),
        "data": {},
    }
    refused = report(platform, owner, forged)
    assert refused.status_code == 403, refused.text
    assert refused.json()["code"] == "forbidden" and "publisher" in refused.json()["detail"]
    # Fields under ``data`` win over the top level: the check reads what is recorded.
    hidden = {**forged, "model": "beta/whatever", "data": {"model": "acme/secret"}}
    assert report(platform, owner, hidden).status_code == 403
    assert metering.ledger.count() == 0
    assert balance(platform, "acme") == 100_000


def test_a_publisher_cannot_bill_a_tenant_that_did_not_call_or_authorize(
    platform: Platform,
) -> None:
    """The second attack: acme bills beta for acme/adder with nothing behind it."""
    priced(platform)
    key = reporter(platform)
    refused = report(platform, key, cloud_event("e-1", quantity=100_000))
    assert refused.status_code == 403, refused.text
    assert refused.json()["code"] == "usage_not_authorized"
    assert refused.json()["index"] == 0
    assert platform.services.metering.ledger.count() == 0
    assert balance(platform) == 1_000_000
    # A tenant reporting its own usage needs nobody's authorization.
    own = report(platform, key, cloud_event("self-1", tenant="acme", quantity=10))
    assert own.status_code == 200, own.text


def test_a_usage_authorization_bounds_what_is_reported(platform: Platform) -> None:
    priced(platform)
    key = reporter(platform)
    payer = member_key(platform, "beta", "billing")
    made = platform.client.post(
        MANDATES, json={"publisher": "acme", "cap_micros": 5_000}, headers=bearer(payer)
    )
    assert made.status_code == 201, made.text
    mandate = made.json()
    assert mandate["consumer"] == "beta" and mandate["state"] == "active"
    assert made.headers["Location"] == f"{MANDATES}/{mandate['id']}"
    first = report(platform, key, cloud_event("a-1", quantity=1_000))  # 3,000
    assert first.status_code == 200, first.text
    # 3,000 more would pass the cap: the whole batch is refused, its first event too.
    over = report(platform, key, cloud_event("a-2", quantity=500), cloud_event("a-3", quantity=500))
    assert over.status_code == 403 and over.json()["code"] == "authorization_exhausted"
    assert over.json()["index"] == 1
    # A retried batch is not counted twice.
    again = report(platform, key, cloud_event("a-1", quantity=1_000))
    assert again.json()["duplicates"] == ["a-1"]
    fits = report(platform, key, cloud_event("a-2", quantity=500))  # 1,500: 4,500 in all
    assert fits.status_code == 200, fits.text
    assert balance(platform) == 1_000_000 - 4_500
    assert sorted(e.event.event_id for e in platform.entries()) == ["a-1", "a-2"]
    for side in (payer, key):  # the consumer and the publisher both see it
        listed = platform.client.get(MANDATES, headers=bearer(side))
        assert listed.status_code == 200, listed.text
        (seen,) = listed.json()["items"]
        assert (seen["spent_micros"], seen["remaining_micros"]) == (4_500, 500)


def test_a_withdrawn_authorization_covers_nothing_more(platform: Platform) -> None:
    priced(platform)
    key = reporter(platform)
    payer = member_key(platform, "beta", "owner")
    mandate = platform.client.post(
        MANDATES, json={"publisher": "acme", "cap_micros": 50_000}, headers=bearer(payer)
    ).json()
    assert report(platform, key, cloud_event("w-1", quantity=10)).status_code == 200
    path = f"{MANDATES}/{mandate['id']}"
    assert platform.client.delete(path, headers=bearer(key)).status_code == 403  # publisher
    platform.services.tenancy.create_tenant("gamma", actor="admin")
    stranger = member_key(platform, "gamma", "owner")
    assert platform.client.get(path, headers=bearer(stranger)).status_code == 404
    assert platform.client.delete(path, headers=bearer(stranger)).status_code == 404
    consumer = platform.key  # beta's consumer role may call, not commit money
    assert platform.client.delete(path, headers=bearer(consumer)).status_code == 403
    withdrawn = platform.client.delete(path, headers=bearer(payer))
    assert withdrawn.status_code == 200, withdrawn.text
    assert withdrawn.json()["state"] == "withdrawn" and withdrawn.json()["withdrawn_by"]
    refused = report(platform, key, cloud_event("w-2", quantity=10))
    assert refused.status_code == 403 and refused.json()["code"] == "usage_not_authorized"
    assert platform.client.get(path, headers=bearer(payer)).json()["spent_micros"] == 30
    audit = platform.client.get("/api/audit?tenant=beta").json()["items"]
    actions = {e["action"] for e in audit}
    assert {
        "usage_authorizations.create_authorization",
        "usage_authorizations.withdraw_authorization",
    } <= actions


def test_an_authorization_is_for_its_model_its_time_and_its_publisher(
    platform: Platform,
) -> None:
    priced(platform)
    platform.publisher.adder("acme/other")
    key = reporter(platform)
    admin = platform.client
    one_model = {"consumer": "beta", "publisher": "acme", "model": "acme/other"}
    assert admin.post(MANDATES, json={**one_model, "cap_micros": 10**6}).status_code == 201
    refused = report(platform, key, cloud_event("m-1"))  # acme/adder: not covered
    assert refused.status_code == 403 and refused.json()["code"] == "usage_not_authorized"
    soon = (SOON + timedelta(hours=1)).isoformat()
    expiring = {"consumer": "beta", "publisher": "acme", "cap_micros": 10**6, "expires_at": soon}
    assert admin.post(MANDATES, json=expiring).status_code == 201
    # Usage of calls made before the authorization existed is not covered by it.
    early = cloud_event("m-2")
    early["time"] = "2020-01-01T00:00:00Z"
    assert report(platform, key, early).json()["code"] == "usage_not_authorized"
    assert report(platform, key, cloud_event("m-3")).status_code == 200
    for bad, code in [
        ({"publisher": "acme", "cap_micros": 0}, 400),
        ({"publisher": "beta", "cap_micros": 10}, 400),  # oneself
        ({"publisher": "acme", "model": "beta/x", "cap_micros": 10}, 400),
        ({"publisher": "acme", "cap_micros": 10, "expires_at": "2020-01-01T00:00:00Z"}, 400),
        ({"publisher": "nobody", "cap_micros": 10}, 404),
        ({"publisher": "acme", "model": "acme/missing", "cap_micros": 10}, 404),
    ]:
        response = admin.post(MANDATES, json={"consumer": "beta", **bad})
        assert response.status_code == code, (bad, response.text)


def call_id_of_a_routed_call(platform: Platform) -> str:
    """beta calls acme/adder over /v2; the id of the reservation the platform took."""
    platform.price(1, unit="compute_ms")  # holds the call's deadline in milliseconds
    assert platform.infer().status_code == 200
    (call_id,) = {entry.event.reservation_id for entry in platform.entries()}
    assert call_id is not None
    return call_id


def test_a_remote_backend_reports_against_the_call_it_served(platform: Platform) -> None:
    priced(platform)
    call_id = call_id_of_a_routed_call(platform)
    held = platform.services.metering.reservations.get(call_id)
    assert held is not None and held.model == "acme/adder" and held.tenant == "beta"
    left = held.amount_micros - (held.settled_micros or 0)
    key = reporter(platform)
    before = balance(platform)
    tokens = left // 3  # output tokens at 3 micros each
    over = report(platform, key, cloud_event("c-1", call_id=call_id, quantity=tokens + 1))
    assert over.status_code == 403 and over.json()["code"] == "authorization_exhausted"
    wrong = [
        cloud_event("c-2", call_id=call_id, tenant="gamma"),
        cloud_event("c-3", call_id="f" * 32),
    ]
    for event in wrong:
        assert report(platform, key, event).json()["code"] == "usage_not_authorized"
    ok = report(platform, key, cloud_event("c-4", call_id=call_id, quantity=tokens))
    assert ok.status_code == 200, ok.text
    assert report(platform, key, cloud_event("c-4", call_id=call_id, quantity=tokens)).json()[
        "duplicates"
    ] == ["c-4"]
    twice = report(platform, key, cloud_event("c-5", call_id=call_id, quantity=1))
    assert twice.status_code == 403 and twice.json()["code"] == "call_already_reported"
    assert balance(platform) == before - 3 * tokens
    reported = platform.services.metering.ledger.get("c-4")
    assert reported is not None and reported.event.unit is Unit.OUTPUT_TOKEN


def test_the_platform_admin_reports_anything(platform: Platform) -> None:
    priced(platform)
    response = platform.client.post(EVENTS, json=[cloud_event("admin-1", quantity=7)])
    assert response.status_code == 200, response.text
    assert balance(platform) == 1_000_000 - 21


def test_a_call_is_reported_against_once_it_settled_and_only_if_it_ran(
    platform: Platform,
) -> None:
    priced(platform)
    key = reporter(platform)
    reservations = platform.services.metering.reservations
    held = reservations.reserve("beta", None, 3_000, ttl_seconds=60, model="acme/adder")
    assert held is not None
    early = report(platform, key, cloud_event("h-1", call_id=held.id, quantity=10))
    assert early.status_code == 409 and early.json()["code"] == "call_in_progress"
    reservations.release(held)  # the work never ran
    released = report(platform, key, cloud_event("h-1", call_id=held.id, quantity=10))
    assert released.json()["code"] == "usage_not_authorized"
    assert platform.services.metering.ledger.count() == 0


def test_concurrent_reports_never_pass_the_cap_together(platform: Platform) -> None:
    """Two reporters race for one authorization with room for one of their batches."""
    priced(platform)
    reporter(platform)
    metering = platform.services.metering
    metering.authorizations.create("beta", "acme", cap_micros=4_000, actor="t")
    acme = Reporter(id="backend", tenant="acme")
    start = threading.Barrier(2)
    outcomes: list[str] = []

    def race(name: str) -> None:
        batch = [cloud_event(f"{name}-{i}", quantity=100) for i in range(10)]  # 3,000
        start.wait()
        try:
            metering.ingest(batch, acme)
            outcomes.append("recorded")
        except Forbidden as exc:
            outcomes.append(exc.code)

    threads = [threading.Thread(target=race, args=(name,)) for name in ("x", "y")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["authorization_exhausted", "recorded"]
    assert metering.ledger.count() == 10
    (mandate,) = metering.authorizations.list(involving="beta")
    assert mandate.spent_micros == 3_000
    assert balance(platform) == 1_000_000 - 3_000
