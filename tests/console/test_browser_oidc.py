"""Signing in to the console through the OpenID provider in a real browser (headless
Chromium, Playwright) against a live server: the sign-in page's provider button, the
local provider's authorization endpoint, and back to the catalog as the mapped member."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import LiveServer
from tests.console.conftest import MODEL, Console, seed
from tests.console.test_browser import browser, shot
from tests.console.test_oidc_sign_in import oidc_platform, provider
from tests.tenancy.oidc_provider import LocalProvider

pytestmark = pytest.mark.slow

__all__ = ["browser", "provider"]  # the fixtures, reused


@pytest.fixture
def live_oidc(
    tmp_path: Path, database_url: str, provider: LocalProvider
) -> Iterator[tuple[Console, LiveServer]]:
    platform = oidc_platform(tmp_path / "home", database_url, provider)
    console = seed(platform)
    server = platform.live()
    try:
        yield console, server
    finally:
        server.stop()
        platform.services.close()


def test_sign_in_through_the_provider_lands_on_the_catalog(
    live_oidc: tuple[Console, LiveServer], browser: object, provider: LocalProvider, tmp_path: Path
) -> None:
    _, server = live_oidc
    url = server.url
    context = browser.new_context(viewport={"width": 1280, "height": 900})  # type: ignore[attr-defined]
    page = context.new_page()
    page.goto(f"{url}/console/models")
    assert "/console/sign-in" in page.url
    shot(page, tmp_path, "sign-in-oidc")
    page.get_by_role("link", name="Sign in with").click()
    page.wait_for_url(f"{url}/console/models")
    assert page.get_by_role("link", name=MODEL).is_visible()
    assert page.locator(".who").inner_text() == "beta"  # the tenant of alice's groups
    cookies = {c["name"]: c for c in context.cookies()}
    assert cookies["modelport_console"]["httpOnly"] is True
    assert "modelport_console_oidc" not in cookies  # the sign-in under way is spent
    # Signing out ends it: the catalog sends the browser to sign in again.
    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url("**/console/sign-in")
    page.goto(f"{url}/console/models")
    assert "/console/sign-in" in page.url
    context.close()
