"""The operator's pages in a real browser (headless Chromium) against a live server: the
platform admin signs in, creates a tenant, finds that event in the audit log by filter,
and reads worker and model health; a phone-width screen scrolls nothing sideways."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import ADMIN_KEY, LiveServer
from tests.console.conftest import Console
from tests.console.test_browser import browser, live, shot, sign_in

pytestmark = pytest.mark.slow
__all__ = ["browser", "live"]  # fixtures, used by name


def test_the_admin_creates_a_tenant_and_finds_it_in_the_audit_log(
    live: tuple[Console, LiveServer], browser: object, tmp_path: Path
) -> None:
    console, server = live
    url = server.url
    page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()  # type: ignore[attr-defined]
    sign_in(page, url, ADMIN_KEY)

    page.get_by_role("link", name="Operator").click()
    page.wait_for_url("**/console/operator/tenants")
    assert page.get_by_role("link", name="gamma").is_visible()
    page.get_by_label("Slug").fill("delta")
    page.get_by_label("Name", exact=True).fill("Delta Labs")
    page.get_by_label("First owner").fill("dora")
    page.get_by_role("button", name="Create tenant").click()
    page.wait_for_url("**/console/operator/tenants/delta")
    assert page.get_by_role("heading", name="Tenant delta").is_visible()
    assert page.locator("#members").get_by_role("rowheader", name="dora").is_visible()
    assert console.services.tenancy.get_tenant("delta").name == "Delta Labs"
    shot(page, tmp_path, "operator-tenant")

    page.get_by_role("link", name="Audit log").click()
    page.wait_for_url("**/console/operator/audit")
    page.get_by_label("Action").fill("tenants.create_tenant")
    page.get_by_label("Tenant").fill("delta")
    page.get_by_label("Action").press("Enter")  # the keyboard submits the filters
    page.wait_for_url("**action=tenants.create_tenant**")
    rows = page.locator("#audit tbody tr")
    assert rows.count() == 1
    assert "delta" in rows.first.inner_text() and "success" in rows.first.inner_text()
    shot(page, tmp_path, "operator-audit")

    page.get_by_role("link", name="Health").click()
    page.wait_for_url("**/console/operator/health")
    assert page.locator("#readiness").inner_text().split()[1] == "ok"
    shot(page, tmp_path, "operator-health")

    phone = browser.new_context(viewport={"width": 390, "height": 844}).new_page()  # type: ignore[attr-defined]
    sign_in(phone, url, ADMIN_KEY)
    phone.goto(f"{url}/console/operator/tenants/delta")
    assert phone.evaluate("document.documentElement.scrollWidth") <= 390
