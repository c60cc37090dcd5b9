"""The publisher workbench in a real browser against a live server: after a consumer's
call, acme's owner signs in, sees the revenue on the workbench index, opens the model's
workbench (the version's revenue by day) and its validation page, on a wide and on a
narrow screen."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.conftest import LiveServer
from tests.console.conftest import MODEL, PRICE_MICROS, Console
from tests.console.test_browser import browser, live, shot, sign_in
from tests.metering.conftest import ADDER_BODY
from tests.polling import eventually

__all__ = ["browser", "live"]

pytestmark = pytest.mark.slow

REVENUE = f"$0.{PRICE_MICROS:06d}"


def test_a_publisher_sees_revenue_for_its_model_after_a_consumers_call(
    live: tuple[Console, LiveServer], browser: object, tmp_path: Path
) -> None:
    console, server = live
    url = server.url
    called = httpx.post(
        f"{url}/v2/models/{MODEL}/infer",
        json=ADDER_BODY,
        headers={"Authorization": f"Bearer {console.beta_key}"},
        timeout=30,
    )
    assert called.status_code == 200, called.text
    services = console.services

    def recorded() -> bool:
        services.metering.deliver()
        return len(services.metering.ledger.entries()) == 1

    assert eventually(recorded)
    tenancy = services.tenancy
    tenancy.add_member("acme", "olga", roles=["owner"], actor="admin")
    owner_key = tenancy.create_key("acme", "olga", name="k", actor="admin").secret

    for width, name in ((1280, "wide"), (380, "narrow")):
        context = browser.new_context(viewport={"width": width, "height": 900})  # type: ignore[attr-defined]
        page = context.new_page()
        sign_in(page, url, owner_key)
        page.get_by_role("link", name="Publisher").click()
        page.wait_for_url("**/console/publisher")
        assert page.locator("#revenue-total").inner_text() == REVENUE
        assert page.locator("svg.chart").count() == 2
        shot(page, tmp_path, f"workbench-{name}")

        page.get_by_role("link", name=MODEL).click()
        page.wait_for_url(f"**/console/publisher/models/{MODEL}")
        versions = page.locator("#versions").inner_text()
        assert "approved" in versions and REVENUE in versions
        assert page.get_by_role("img", name="Revenue of version 1 by day").is_visible()
        shot(page, tmp_path, f"workbench-model-{name}")

        page.get_by_role("link", name="not validated").click()
        page.wait_for_url("**/versions/1/validation")
        assert page.locator("#not-validated").is_visible()
        context.close()
