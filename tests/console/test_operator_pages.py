"""The operator's pages over the real app: the platform admin lists and creates tenants,
manages members and roles, filters the audit log and reads worker and model health; a
tenant's owner manages only their own tenant; a consumer gets the API's refusal and no
data; a forged form changes nothing."""

from __future__ import annotations

import re

import pytest
from httpx2 import Response
from starlette.testclient import TestClient

from modelport.console import operator_pages
from modelport.tenancy.policy import ROLE_PERMISSIONS
from modelport.tenancy.types import Tier
from tests.conftest import ADMIN_KEY
from tests.console.conftest import MODEL, Console, browser_client, csrf_of, sign_in


def signed_in(console: Console, key: str) -> TestClient:
    client = browser_client(console)
    sign_in(client, key)
    return client


def post(client: TestClient, page: str, action: str, data: dict[str, object]) -> Response:
    token = csrf_of(client.get(page).text)
    return client.post(action, data={"csrf_token": token, **data}, follow_redirects=False)


def owner_key(console: Console, tenant: str, member: str) -> str:
    tenancy = console.services.tenancy
    tenancy.add_member(tenant, member, roles=["owner"], actor="admin")
    secret: str = tenancy.create_key(tenant, member, name="k", actor="admin").secret
    return secret


def audit_rows(html: str) -> list[str]:
    body = html.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    return re.findall(r"<tr>(.*?)</tr>", body, re.S)


def test_the_admin_lists_and_creates_tenants(console: Console) -> None:
    admin = signed_in(console, ADMIN_KEY)
    page = admin.get("/console/operator/tenants")
    assert page.status_code == 200
    for slug in ("acme", "beta", "gamma"):
        assert f'href="/console/operator/tenants/{slug}"' in page.text
    assert 'href="/console/operator/tenants">Operator</a>' in page.text  # the nav link

    created = post(
        admin,
        "/console/operator/tenants",
        "/console/operator/tenants",
        {"slug": "delta", "name": "Delta Labs", "owner": "dora", "require_separation": "on"},
    )
    assert created.status_code == 303
    assert created.headers["location"] == "/console/operator/tenants/delta"
    tenant = console.services.tenancy.get_tenant("delta")
    assert tenant.name == "Delta Labs" and tenant.require_separation
    page = admin.get("/console/operator/tenants/delta")
    assert page.status_code == 200 and "<h1>Tenant delta</h1>" in page.text
    assert '<th scope="row">dora</th>' in page.text
    assert 'id="m1-owner" name="role" value="owner" type="checkbox" checked' in page.text


def test_bad_or_duplicate_tenants_are_refused_with_the_apis_code(console: Console) -> None:
    admin = signed_in(console, ADMIN_KEY)
    page = "/console/operator/tenants"
    duplicate = post(admin, page, page, {"slug": "gamma"})
    assert duplicate.status_code == 409
    assert "(tenant_exists)" in duplicate.text
    bad = post(admin, page, page, {"slug": "Not A Slug!", "name": "kept"})
    assert bad.status_code in (400, 422)
    assert 'role="alert"' in bad.text and 'value="kept"' in bad.text
    assert [t.slug for t in console.services.tenancy.list_tenants()] == ["acme", "beta", "gamma"]


def test_the_admin_adds_a_member_changes_roles_and_removes_them(console: Console) -> None:
    admin = signed_in(console, ADMIN_KEY)
    page = "/console/operator/tenants/gamma"
    tenancy = console.services.tenancy
    added = admin.post(
        f"{page}/members",
        data={
            "csrf_token": csrf_of(admin.get(page).text),
            "name": "pia",
            "kind": "member",
            "role": ["publisher", "deployer"],
        },
        follow_redirects=False,
    )
    assert added.status_code == 303, added.text
    assert sorted(tenancy.get_member("gamma", "pia").roles) == ["deployer", "publisher"]
    assert '<th scope="row">pia</th>' in admin.get(page).text

    changed = post(admin, page, f"{page}/members/pia/roles", {"role": "approver"})
    assert changed.status_code == 303
    assert list(tenancy.get_member("gamma", "pia").roles) == ["approver"]

    unknown = post(admin, page, f"{page}/members/pia/roles", {"role": "wizard"})
    assert unknown.status_code == 400
    assert 'role="alert"' in unknown.text
    assert list(tenancy.get_member("gamma", "pia").roles) == ["approver"]  # unchanged

    removed = post(admin, page, f"{page}/members/pia/remove", {})
    assert removed.status_code == 303
    assert '<th scope="row">pia</th>' not in admin.get(page).text


def test_the_admin_changes_a_tenants_settings(console: Console) -> None:
    admin = signed_in(console, ADMIN_KEY)
    page = "/console/operator/tenants/gamma"
    saved = post(admin, page, f"{page}/settings", {"name": "Gamma Inc", "no_cache": "on"})
    assert saved.status_code == 303
    tenant = console.services.tenancy.get_tenant("gamma")
    assert (tenant.name, tenant.no_cache, tenant.shared_cache) == ("Gamma Inc", True, False)
    assert 'id="s-no_cache" name="no_cache" type="checkbox" checked' in admin.get(page).text


def test_audit_filters_narrow_the_list_and_pages_follow_the_cursor(
    console: Console, monkeypatch: pytest.MonkeyPatch
) -> None:
    admin = signed_in(console, ADMIN_KEY)
    for slug in ("delta", "epsilon", "zeta"):
        post(admin, "/console/operator/tenants", "/console/operator/tenants", {"slug": slug})
    everything = audit_rows(admin.get("/console/operator/audit").text)
    created = {"action": "tenants.create_tenant", "outcome": "success"}
    rows = audit_rows(admin.get("/console/operator/audit", params=created).text)
    assert len(rows) == 3 < len(everything)
    assert all("tenants.create_tenant" in r and "success (201)" in r for r in rows)
    failed = audit_rows(
        admin.get("/console/operator/audit", params={**created, "outcome": "failed"}).text
    )
    assert failed and all("success" not in r for r in failed)
    one = audit_rows(
        admin.get(
            "/console/operator/audit", params={"action": "tenants.create_tenant", "tenant": "zeta"}
        ).text
    )
    assert len(one) == 1 and "zeta" in one[0]
    later = admin.get("/console/operator/audit", params={"since": "2999-01-01T00:00"})
    assert later.status_code == 200 and "No events match." in later.text  # a browser's time
    earlier = admin.get("/console/operator/audit", params={**created, "since": "2000-01-01T00:00"})
    assert len(audit_rows(earlier.text)) == 3

    monkeypatch.setattr(operator_pages, "AUDIT_PAGE", "2")
    first = admin.get("/console/operator/audit", params=created)
    assert [("zeta" in r, "epsilon" in r) for r in audit_rows(first.text)] == [
        (True, False),
        (False, True),
    ]
    found = re.search(r'href="([^"]+)" rel="next"', first.text)
    assert found and "action=tenants.create_tenant" in found[1] and "outcome=success" in found[1]
    second = admin.get(found[1].replace("&amp;", "&"))
    [last] = audit_rows(second.text)
    assert "delta" in last
    assert 'rel="next"' not in second.text and "Newest events" in second.text


def test_a_bad_audit_filter_is_a_clear_error(console: Console) -> None:
    admin = signed_in(console, ADMIN_KEY)
    response = admin.get("/console/operator/audit", params={"since": "yesterday"})
    assert response.status_code == 400
    assert 'role="alert"' in response.text and "since" in response.text
    assert "(invalid_request)" in response.text


def test_health_lists_a_version_loaded_by_a_call(console: Console) -> None:
    admin = signed_in(console, ADMIN_KEY)
    before = admin.get("/console/operator/health")
    assert before.status_code == 200 and "No version is loaded" in before.text
    assert console.platform.infer(console.beta_key, model=MODEL).status_code == 200
    page = admin.get("/console/operator/health").text
    assert f'<th scope="row">{MODEL}:1</th>' in page
    assert '<td class="health-ready">ready</td>' in page
    assert '<dd class="health-ok">ok</dd>' in page  # readiness: the database answers


@pytest.mark.parametrize(
    "path",
    [
        "/console/operator/audit",
        "/console/operator/health",
        "/console/operator/tenants/beta",
        "/console/operator/tenants/gamma",
    ],
)
def test_a_consumer_gets_the_apis_refusal_and_no_data(console: Console, path: str) -> None:
    assert console.platform.infer(console.beta_key, model=MODEL).status_code == 200
    beta = signed_in(console, console.beta_key)
    response = beta.get(path)
    assert response.status_code in (403, 404)
    code = "forbidden" if response.status_code == 403 else "tenant_not_found"
    assert f"<code>{code}</code>" in response.text
    assert "<table" not in response.text  # no data: neither rows nor an empty table
    for data in (">gil<", ">ana<", f"{MODEL}:1", "tenants.create_tenant"):
        assert data not in response.text


def test_a_consumer_cannot_create_tenants_nor_add_members(console: Console) -> None:
    beta = signed_in(console, console.beta_key)
    listing = beta.get("/console/operator/tenants")
    assert listing.status_code == 200
    assert "gamma" not in listing.text and "New tenant" not in listing.text
    refused = post(beta, "/console/operator/tenants", "/console/operator/tenants", {"slug": "x"})
    assert refused.status_code == 403
    refused = post(
        beta,
        "/console/operator/tenants",
        "/console/operator/tenants/beta/members",
        {"name": "eve", "role": "owner"},
    )
    assert refused.status_code == 403
    assert "<code>forbidden</code>" in refused.text
    assert "x" not in [t.slug for t in console.services.tenancy.list_tenants()]
    assert "eve" not in [m.name for m in console.services.tenancy.list_members("beta")]


def test_an_owner_manages_their_tenant_only(console: Console) -> None:
    owner = signed_in(console, owner_key(console, "gamma", "olga"))
    page = owner.get("/console/operator/tenants/gamma")
    assert page.status_code == 200 and '<th scope="row">gil</th>' in page.text
    assert 'href="/console/operator/tenants/gamma">Tenant</a>' in page.text  # the nav link
    assert owner.get("/console/operator/tenants/beta").status_code == 404
    made_admin = post(
        owner,
        "/console/operator/tenants/gamma",
        "/console/operator/tenants/gamma/members/gil/roles",
        {"role": "admin"},
    )
    assert made_admin.status_code == 403
    assert list(console.services.tenancy.get_member("gamma", "gil").roles) != ["admin"]
    audit = owner.get("/console/operator/audit", params={"tenant": "beta"})
    assert audit.status_code == 404 and "<code>tenant_not_found</code>" in audit.text
    assert owner.get("/console/operator/audit").status_code == 200


def test_the_admin_suspends_and_reactivates_a_tenant(console: Console) -> None:
    gamma = signed_in(console, console.gamma_key)
    assert gamma.get("/console/keys").status_code == 200
    admin = signed_in(console, ADMIN_KEY)
    page = "/console/operator/tenants/gamma"
    assert 'action="/console/operator/tenants/gamma/suspend"' in admin.get(page).text
    blank = post(admin, page, page + "/suspend", {"reason": ""})
    assert blank.status_code == 400 and "reason_required" in blank.text

    suspended = post(admin, page, page + "/suspend", {"reason": "unpaid invoice"})
    assert suspended.status_code == 303
    shown = admin.get(page).text
    assert "Suspended since" in shown and "unpaid invoice" in shown
    assert 'action="/console/operator/tenants/gamma/reactivate"' in shown
    listed = admin.get("/console/operator/tenants").text
    assert listed.count('<strong class="error">suspended</strong>') == 1
    # The tenant's signed-in people get the API's refusal, and no data.
    refused = gamma.get("/console/keys")
    assert refused.status_code == 403 and "tenant_suspended" in refused.text

    assert post(admin, page, page + "/reactivate", {}).status_code == 303
    assert console.services.tenancy.get_tenant("gamma").suspended_at is None
    assert gamma.get("/console/keys").status_code == 200


def test_an_owner_cannot_suspend_their_tenant(console: Console) -> None:
    owner = signed_in(console, owner_key(console, "gamma", "olga"))
    page = "/console/operator/tenants/gamma"
    assert "/suspend" not in owner.get(page).text
    refused = post(owner, page, page + "/suspend", {"reason": "x"})
    assert refused.status_code == 403
    assert console.services.tenancy.get_tenant("gamma").suspended_at is None


def test_a_forged_form_is_refused_and_changes_nothing(console: Console) -> None:
    admin = signed_in(console, ADMIN_KEY)
    for action, data in (
        ("/console/operator/tenants", {"slug": "forged"}),
        ("/console/operator/tenants/gamma/members", {"name": "mallory", "role": "owner"}),
        ("/console/operator/tenants/gamma/members/gil/remove", {}),
    ):
        response = admin.post(action, data={"csrf_token": "forged", **data})
        assert response.status_code == 403
        assert "<code>csrf_refused</code>" in response.text
    tenancy = console.services.tenancy
    assert "forged" not in [t.slug for t in tenancy.list_tenants()]
    assert sorted(m.name for m in tenancy.list_members("gamma")) == ["gil"]


def test_the_forms_offer_every_role_tenancy_knows() -> None:
    assert tuple(sorted(ROLE_PERMISSIONS)) == operator_pages.ROLES


def test_the_admin_moves_a_tenant_to_another_tier_and_its_member_sees_it(
    console: Console,
) -> None:
    admin = signed_in(console, ADMIN_KEY)
    page = "/console/operator/tenants/gamma"
    shown = admin.get(page).text
    assert '<strong id="tier-now">standard</strong>' in shown  # a new tenant's
    assert '<option value="standard" selected>standard</option>' in shown
    moved = post(admin, page, f"{page}/tier", {"tier": "premium"})
    assert moved.status_code == 303 and moved.headers["location"] == page
    assert console.services.tenancy.get_tenant("gamma").tier.value == "premium"
    assert '<option value="premium" selected>premium</option>' in admin.get(page).text

    unknown = post(admin, page, f"{page}/tier", {"tier": "gold"})
    assert unknown.status_code == 400 and "(invalid_request)" in unknown.text
    forged = admin.post(f"{page}/tier", data={"csrf_token": "forged", "tier": "free"})
    assert forged.status_code == 403 and "<code>csrf_refused</code>" in forged.text
    assert console.services.tenancy.get_tenant("gamma").tier.value == "premium"

    gamma = signed_in(console, console.gamma_key)  # a consumer of gamma: its own tier
    keys = gamma.get("/console/keys")
    assert keys.status_code == 200
    assert 'Tenant <strong>gamma</strong>, tier <strong id="tier">premium</strong>' in keys.text


def test_an_owner_sees_their_tier_but_cannot_change_it(console: Console) -> None:
    owner = signed_in(console, owner_key(console, "gamma", "olga"))
    page = "/console/operator/tenants/gamma"
    shown = owner.get(page).text
    assert '<strong id="tier-now">standard</strong>' in shown and f"{page}/tier" not in shown
    refused = post(owner, page, f"{page}/tier", {"tier": "premium"})
    assert refused.status_code == 403 and "(forbidden)" in refused.text
    assert console.services.tenancy.get_tenant("gamma").tier.value == "standard"


def test_the_tier_form_offers_every_tier_tenancy_knows() -> None:
    assert tuple(t.value for t in Tier) == operator_pages.TIERS
