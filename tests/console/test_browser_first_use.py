"""What a new user meets first, in a real browser (headless Chromium) against a live
server: the playground runs the example its page prefills (rows as JSON arrays) and a
refusal shows an accepted example; prices set for a version are the ones the page and
the chat box quote, and what the ledger charged; usage counts a chat as one call and a
refused call as one failed call."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from modelport.cli.demo import EXAMPLE_ROWS
from modelport.cli.iris import CLASSES, iris_classifier
from tests.api_openai.conftest import FAILING_WORD, World
from tests.conftest import LiveServer
from tests.console.conftest import Console, make_platform, seed
from tests.console.test_browser import browser, shot, sign_in
from tests.metering.conftest import approve
from tests.polling import eventually

pytestmark = pytest.mark.slow
__all__ = ["browser"]  # the browser fixture, shared with test_browser.py

IRIS = "acme/iris"
IRIS_PRICE = 1_000
WRITER = "acme/writer"


@pytest.fixture
def iris_live(tmp_path: Path, database_url: str) -> Iterator[tuple[Console, LiveServer]]:
    """The console's platform, with acme/iris (the demo's trained classifier, its
    manifest example two rows written as nested lists, as the demo writes it), public
    and approved, its version 1 priced per call."""
    platform = make_platform(tmp_path / "home", database_url)
    console = seed(platform)
    model = {"owner": "acme", "name": "iris", "license": "MIT", "visibility": "public"}
    assert platform.client.post("/api/models", json=model).status_code == 201
    platform.publisher.models.add(IRIS)
    example = {
        "inputs": [{"name": "features", "datatype": "FP32", "shape": [2, 4], "data": EXAMPLE_ROWS}]
    }
    platform.publisher.publish(
        IRIS,
        "1",
        iris_classifier(),
        inputs=[{"name": "features", "datatype": "FP32", "shape": [-1, 4]}],
        outputs=[{"name": "probabilities", "datatype": "FP32", "shape": [-1, 3]}],
        examples=[example],
    )
    approve(platform.services, "acme", "iris", "1")
    platform.price(IRIS_PRICE, model=IRIS, version="1")
    server = platform.live()
    try:
        yield console, server
    finally:
        server.stop()
        platform.services.close()


def test_the_playground_runs_what_its_page_prefills(
    iris_live: tuple[Console, LiveServer], browser: object, tmp_path: Path
) -> None:
    console, server = iris_live
    page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()  # type: ignore[attr-defined]
    sign_in(page, server.url, console.beta_key)
    page.goto(f"{server.url}/console/models/{IRIS}")
    box = page.get_by_role("textbox", name="features FP32")
    assert box.input_value() == "[5.1, 3.5, 1.4, 0.2],\n[6.7, 3.0, 5.2, 2.3]"
    # The price set for version 1 alone is the page's price, not "free".
    prices = page.locator("#prices").inner_text()
    assert "prediction" in prices and "$0.001000" in prices and "version 1" in prices
    page.get_by_role("button", name="Run version 1").click()
    page.locator("#answer").wait_for()
    [output] = json.loads(page.locator("#answer").inner_text())
    rows = [output["data"][i : i + 3] for i in (0, 3)]
    assert [CLASSES[row.index(max(row))] for row in rows] == ["setosa", "virginica"]
    assert "$0.001000 per call" in page.locator(".result").inner_text()
    shot(page, tmp_path, "playground-rows")

    # A typo is refused with an example the form accepts, and nothing is called.
    page.get_by_role("textbox", name="features FP32").fill("[5.1, 3.5, 1.4]")
    page.get_by_role("button", name="Run version 1").click()
    error = page.locator(".result .error")
    error.wait_for()
    assert "e.g. [5.1, 3.5, 1.4, 0.2], [6.7, 3.0, 5.2, 2.3]" in error.inner_text()
    assert page.locator("#answer").count() == 0
    console.services.metering.deliver()
    calls = {e.event.prediction_id for e in console.services.metering.ledger.entries()}
    assert len(calls) == 1


def test_a_version_priced_chat_is_quoted_and_usage_counts_calls(
    chat_world: World, browser: object, tmp_path: Path
) -> None:
    # Priced as the demo prices its chat model: for version 1, not model-wide.
    chat_world.price(WRITER, "input_token", 2, version="1")
    chat_world.price(WRITER, "output_token", 8, version="1")
    chat_world.credit(1_000_000)
    # A member who calls and may read the tenant's usage (billing).
    tenancy = chat_world.services.tenancy
    tenancy.add_member("beta", "ana", roles=["consumer", "billing"], actor="admin")
    key = tenancy.create_key("beta", "ana", name="laptop", actor="admin").secret
    page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()  # type: ignore[attr-defined]
    sign_in(page, chat_world.url, key)
    page.goto(f"{chat_world.url}/console/models/{WRITER}")
    page.get_by_label("Message").fill("hello from the browser")
    page.get_by_role("button", name="Send").click()
    page.locator("#chat-facts").wait_for(state="visible")
    assert page.locator("#chat-tokens").inner_text() == "4 in, 4 out"
    assert page.locator("#chat-price").inner_text() == "$0.000040"  # 4 * 2 + 4 * 8
    shot(page, tmp_path, "chat-priced")

    # Four more chats through the openai SDK, and one the engine fails.
    client = chat_world.client(key)
    for i in range(4):
        client.chat.completions.create(
            model=WRITER, messages=[{"role": "user", "content": f"call {i}"}]
        )
    with pytest.raises(openai.InternalServerError):
        client.chat.completions.create(
            model=WRITER, messages=[{"role": "user", "content": FAILING_WORD}]
        )

    def recorded() -> bool:
        return len({e.event.prediction_id for e in chat_world.entries()}) == 6

    assert eventually(recorded)
    entries = chat_world.entries()
    assert len(entries) > 6  # several lines a call: the page must not count them as calls
    charged = sum(e.event.amount_micros for e in entries)
    first = [e for e in entries if e.event.prediction_id == entries[0].event.prediction_id]
    assert sum(e.event.amount_micros for e in first) == 40  # what the chat box quoted

    page.get_by_role("link", name="Usage & spend").click()
    page.wait_for_url("**/console/usage")
    by_model = page.locator("#by-model tbody tr", has_text=WRITER)
    assert by_model.locator("td").nth(1).inner_text() == "6"
    assert page.locator("#total").inner_text() == f"${charged / 1e6:.6f}"
    recent = page.locator("#recent-calls tbody tr")
    assert recent.count() == 6
    failed = page.locator("#recent-calls tbody tr", has_text="failed")
    assert failed.count() == 1 and "$0.000000" in failed.inner_text()
    shot(page, tmp_path, "usage-calls")
