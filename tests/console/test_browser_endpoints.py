"""The endpoint pages in a real browser against a live server: a deployer finds its
endpoint, reads its canary's progress, rolls the canary back (accepting the confirm
dialog) and sees the traffic back on the stable version."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import ADMIN_KEY, LiveServer
from tests.console.conftest import seed
from tests.console.endpoint_seed import ENDPOINT, Deployed, deploy_canary
from tests.console.test_browser import browser, shot, sign_in
from tests.metering.conftest import make_platform

pytestmark = pytest.mark.slow

__all__ = ["browser"]  # the fixture, shared with the console's other browser tests


@pytest.fixture
def live_canary(tmp_path: Path, database_url: str) -> Iterator[tuple[Deployed, LiveServer]]:
    platform = make_platform(tmp_path / "home", database_url)
    deployed = deploy_canary(seed(platform))  # while the in-process app runs the controller
    server = platform.live()
    try:
        yield deployed, server
    finally:
        server.stop()
        platform.services.close()


def test_a_deployer_watches_a_canary_and_rolls_it_back(
    live_canary: tuple[Deployed, LiveServer], browser: object, tmp_path: Path
) -> None:
    deployed, server = live_canary
    page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()  # type: ignore[attr-defined]
    sign_in(page, server.url, deployed.deployer_key)
    page.get_by_role("link", name="Endpoints").click()
    page.wait_for_url("**/console/endpoints")
    assert "acme/summer:2 — 50%" in page.locator("#endpoints").inner_text()
    page.get_by_role("link", name=ENDPOINT).click()
    page.wait_for_url(f"**/console/endpoints/{ENDPOINT}")
    assert page.locator("#canary-status").inner_text() == "progressing"
    assert page.locator("#canary-step").inner_text() == "1 of 2 (50% → 100%)"
    assert page.locator("#canary-share").inner_text() == "50%"
    assert "Candidate requests this step" in page.locator("#gates").inner_text()
    shot(page, tmp_path, "endpoint-canary")
    page.on("dialog", lambda dialog: dialog.accept())  # the rollback's confirm
    page.get_by_role("button", name=f"Roll back deployment {deployed.canary_id}").click()
    page.wait_for_url(f"**/console/endpoints/{ENDPOINT}?rolled={deployed.canary_id}")
    assert "was rolled back" in page.locator("#rolled").inner_text()
    history = page.locator("#deployments").inner_text()
    assert "rolled back" in history
    assert page.locator("#canary").count() == 0
    shot(page, tmp_path, "endpoint-rolled-back")
    answer = httpx.get(
        f"{server.url}/api/endpoints/{ENDPOINT}",
        headers={"Authorization": f"Bearer {ADMIN_KEY}"},
        timeout=10,
    )
    assert answer.json()["traffic"] == [{"model": "acme/summer", "version": "1", "weight": 100}]
