"""The console in a real browser (headless Chromium driven by Playwright) against a live
server: sign in, find a model by search, run the playground and the streamed chat, create and revoke a key,
see the call in usage and spend, another tenant refused by URL, a forged form refused,
sign out. Each main page is captured as a screenshot (into docs/console/ when
MODELPORT_TEST_CONSOLE_SCREENSHOTS names that folder)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from modelport.metering.types import BalanceScope
from tests.api_openai.conftest import World
from tests.conftest import LiveServer, skip_or_fail
from tests.console.conftest import MODEL, Console, make_platform, seed
from tests.polling import eventually

pytestmark = pytest.mark.slow

CHROMIUM = os.environ.get("MODELPORT_TEST_CHROMIUM", "/usr/bin/chromium")
SHOTS_ENV = "MODELPORT_TEST_CONSOLE_SCREENSHOTS"

try:
    from playwright import sync_api as playwright_api
except ImportError:  # the dev extra installs it; CI requires it (skip_or_fail below)
    playwright_api = None  # type: ignore[assignment]


@pytest.fixture
def live(tmp_path: Path, database_url: str) -> Iterator[tuple[Console, LiveServer]]:
    platform = make_platform(tmp_path / "home", database_url)
    console = seed(platform)
    server = platform.live()
    try:
        yield console, server
    finally:
        server.stop()
        platform.services.close()


@pytest.fixture
def browser() -> Iterator[object]:
    if playwright_api is None:
        skip_or_fail("browser tests need playwright (the dev extra)")
    if not Path(CHROMIUM).exists():
        skip_or_fail(f"browser tests need Chromium at {CHROMIUM} (apt-get install chromium)")
    with playwright_api.sync_playwright() as driver:
        launched = driver.chromium.launch(executable_path=CHROMIUM, headless=True)
        yield launched
        launched.close()


def shot(page: object, tmp_path: Path, name: str) -> None:
    target = Path(os.environ.get(SHOTS_ENV) or tmp_path)
    target.mkdir(parents=True, exist_ok=True)
    path = target / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)  # type: ignore[attr-defined]
    assert path.read_bytes().startswith(b"\x89PNG")


def sign_in(page: object, url: str, key: str) -> None:
    page.goto(f"{url}/console/models")  # type: ignore[attr-defined]
    page.get_by_label("API key").fill(key)  # type: ignore[attr-defined]
    page.get_by_role("button", name="Sign in").click()  # type: ignore[attr-defined]
    page.wait_for_url(f"{url}/console/models")  # type: ignore[attr-defined]


def test_a_consumer_finds_tries_pays_and_manages_keys(
    live: tuple[Console, LiveServer], browser: object, tmp_path: Path
) -> None:
    console, server = live
    url = server.url
    context = browser.new_context(viewport={"width": 1280, "height": 900})  # type: ignore[attr-defined]
    page = context.new_page()
    page.goto(f"{url}/console/models")
    assert "/console/sign-in" in page.url
    shot(page, tmp_path, "sign-in")
    sign_in(page, url, console.beta_key)

    # Find the model by search (the keyboard submits the form).
    page.get_by_label("Search").fill("summer")
    page.get_by_label("Search").press("Enter")
    page.wait_for_url("**q=summer**")
    shot(page, tmp_path, "catalog")
    page.get_by_role("link", name=MODEL).click()
    page.wait_for_url(f"**/console/models/{MODEL}")
    assert page.get_by_role("heading", name="Adder").is_visible()  # the card, rendered
    shot(page, tmp_path, "model")

    # The tensor playground, prefilled from the manifest's example.
    page.get_by_role("textbox", name="x FP32").fill("10, 20, 30, 40")
    page.get_by_role("button", name="Run version 1").click()
    answer = page.locator("#answer")
    answer.wait_for()
    assert "11.0" in answer.inner_text() and "41.0" in answer.inner_text()
    assert "$0.002500 per call" in page.locator(".result").inner_text()
    shot(page, tmp_path, "playground")

    # The call appears in usage and spend, and the balance went down.
    services = console.services

    def billed() -> bool:
        services.metering.deliver()
        return len(services.metering.ledger.entries()) == 1

    assert eventually(billed)
    page.get_by_role("link", name="Usage & spend").click()
    page.wait_for_url("**/console/usage")
    assert page.locator("#total").inner_text() == "$0.002500"
    assert MODEL in page.locator("#by-model").inner_text()
    assert page.locator("svg.chart").count() == 3  # by day, model and key
    balance = services.metering.balances.get(BalanceScope.TENANT, "beta").balance_micros
    assert balance == 997_500
    shot(page, tmp_path, "usage")

    # A key, shown once, then revoked (the confirmation dialog accepted).
    page.get_by_role("link", name="API keys").click()
    page.get_by_label("Name").fill("notebook")
    page.get_by_role("button", name="Create key").click()
    secret = page.locator("#new-key").inner_text()
    assert secret.startswith("mp_live_")
    shot(page, tmp_path, "keys")
    page.goto(f"{url}/console/keys")
    assert secret not in page.content()
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Revoke key notebook").click()
    page.wait_for_url("**/console/keys")
    row = page.locator("tr", has_text="notebook")
    assert "revoked" in row.inner_text()
    key_id = secret.split("_")[2]
    [revoked] = [k for k in services.tenancy.list_keys(tenant="beta") if k.id == key_id]
    assert revoked.revoked_at is not None

    # Phone width: one column, nothing wider than the screen.
    phone = browser.new_context(viewport={"width": 390, "height": 844})  # type: ignore[attr-defined]
    small = phone.new_page()
    sign_in(small, url, console.beta_key)
    small.goto(f"{url}/console/models/{MODEL}")
    width = small.evaluate("document.documentElement.scrollWidth")
    assert width <= 390
    shot(small, tmp_path, "model-phone")

    # Sign out: the cookie no longer opens a page.
    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url("**/console/sign-in")
    page.goto(f"{url}/console/keys")
    assert "/console/sign-in" in page.url


def test_another_tenant_is_refused_by_url_and_a_forged_form_is_refused(
    live: tuple[Console, LiveServer], browser: object
) -> None:
    console, server = live
    url = server.url
    page = browser.new_context().new_page()  # type: ignore[attr-defined]
    sign_in(page, url, console.gamma_key)
    response = page.goto(f"{url}/console/models/acme/secret")
    assert response.status == 404
    assert "model_not_found" in page.content()
    assert console.beta_key_id not in page.goto(f"{url}/console/keys").text()
    # A form posted without the session's token (as another site would) is refused.
    with page.expect_navigation():
        page.evaluate(
            """() => {
        const form = document.createElement("form");
        form.method = "post";
        form.action = "/console/keys";
        const name = document.createElement("input");
        name.name = "name"; name.value = "forged";
        form.appendChild(name);
        document.body.appendChild(form);
        form.submit();
    }"""
        )
    assert "csrf_refused" in page.content()
    assert not [k for k in console.services.tenancy.list_keys(tenant="gamma") if k.name == "forged"]


def test_chromium_is_where_the_tests_expect_it() -> None:
    """CI installs Debian's chromium (.ci/run); the browser tests need it there."""
    if shutil.which("chromium") is None and not Path(CHROMIUM).exists():
        skip_or_fail("chromium is not installed")
    assert Path(CHROMIUM).exists()


def test_a_chat_model_answers_in_the_chat_box(
    chat_world: World, browser: object, tmp_path: Path
) -> None:
    chat_world.price("acme/writer", "output_token", 5)
    chat_world.credit(1_000_000)
    page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()  # type: ignore[attr-defined]
    sign_in(page, chat_world.url, chat_world.key)
    page.goto(f"{chat_world.url}/console/models/acme/writer")
    page.get_by_label("Message").fill("hello from the browser")
    page.get_by_role("button", name="Send").click()
    page.locator("#chat-facts").wait_for(state="visible")
    answer = page.locator(".turn-assistant .turn-text").inner_text()
    assert answer.split() == ["hello", "from", "the", "browser"]
    assert page.locator("#chat-tokens").inner_text().endswith("4 out")
    assert page.locator("#chat-price").inner_text() == "$0.000020"
    assert page.locator("#chat-served").inner_text() == "acme/writer:1"
    # A second turn carries the conversation, routed by the task (the one chat model).
    page.get_by_label("Let the platform choose").check()
    page.get_by_label("Prefer").select_option("cheapest")
    page.get_by_label("Message").fill("again")
    page.get_by_role("button", name="Send").click()
    # (Playwright's expect polls from outside the page: the console's CSP forbids eval.)
    second = page.locator(".turn-assistant .turn-text").nth(1)
    playwright_api.expect(second).to_contain_text("again", timeout=30_000)
    shot(page, tmp_path, "chat")
    assert len(chat_world.engine.records) == 2


def test_a_publisher_reads_its_earnings(
    live: tuple[Console, LiveServer], browser: object, tmp_path: Path
) -> None:
    console, server = live
    assert console.platform.infer(console.beta_key, model=MODEL).status_code == 200
    console.platform.entries()
    period = datetime.now(UTC).strftime("%Y-%m")
    console.services.billing.generate(period)
    tenancy = console.services.tenancy
    tenancy.add_member("acme", "olga", roles=["owner"], actor="admin")
    owner_key = tenancy.create_key("acme", "olga", name="k", actor="admin").secret
    page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()  # type: ignore[attr-defined]
    sign_in(page, server.url, owner_key)
    page.get_by_role("link", name="Publisher").click()
    page.wait_for_url("**/console/publisher")
    assert "$0.002500" in page.locator("#statements").inner_text()
    shot(page, tmp_path, "publisher")
    page.locator("#statements").get_by_role("link", name=period).click()
    page.wait_for_url("**/console/publisher/statements/*")
    assert MODEL in page.locator("#statement-lines").inner_text()
