"""The marketplace in a real browser (headless Chromium) against a live server: a
consumer opens the datasets and prompt templates from the nav, then calls the model's
task alias from the playground and sees which model the platform chose, and its price."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import LiveServer
from tests.console.conftest import MODEL, Console
from tests.console.market import (
    CHEAPER,
    CHEAPER_MICROS,
    PRIVATE_DATASET,
    PUBLIC_DATASET,
    PUBLIC_TEMPLATE,
    cheaper_model,
    publish_assets,
)
from tests.console.test_browser import browser, live, shot, sign_in

pytestmark = pytest.mark.slow
__all__ = ["browser", "live"]  # fixtures, shared with test_browser.py


def test_a_consumer_browses_datasets_and_templates_and_routes_a_call(
    live: tuple[Console, LiveServer], browser: object, tmp_path: Path
) -> None:
    console, server = live
    url = server.url
    publish_assets(console)
    cheaper_model(console)
    context = browser.new_context(viewport={"width": 1280, "height": 900})  # type: ignore[attr-defined]
    page = context.new_page()
    sign_in(page, url, console.beta_key)

    page.get_by_role("link", name="Datasets", exact=True).click()
    page.wait_for_url("**/console/datasets")
    listed = page.locator("#assets").inner_text()
    assert PUBLIC_DATASET in listed and PRIVATE_DATASET not in listed
    page.get_by_role("link", name=PUBLIC_DATASET).click()
    page.wait_for_url(f"**/console/datasets/{PUBLIC_DATASET}")
    assert "test.parquet" in page.locator("#splits").inner_text()
    assert "label" in page.locator("#columns").inner_text()
    shot(page, tmp_path, "dataset")

    page.get_by_role("link", name="Templates", exact=True).click()
    page.wait_for_url("**/console/templates")
    page.get_by_role("link", name=PUBLIC_TEMPLATE).click()
    page.wait_for_url(f"**/console/templates/{PUBLIC_TEMPLATE}")
    assert "Say hello to {{name}}" in page.locator("#messages").inner_text()
    shot(page, tmp_path, "template")

    # The model's playground, routed: the platform picks the cheapest adder it may call.
    page.goto(f"{url}/console/models/{MODEL}")
    page.get_by_role("textbox", name="x FP32").fill("10, 20, 30, 40")
    run = page.locator("button#run")
    assert run.inner_text() == "Run version 1"
    page.get_by_label("Let the platform choose").check()
    assert run.inner_text() == "Run route:tabular-regression"  # the button says what it runs
    page.get_by_label("Let the platform choose").uncheck()
    assert run.inner_text() == "Run version 1"
    page.get_by_label("Let the platform choose").check()
    page.get_by_label("Prefer").select_option("cheapest")
    page.get_by_role("button", name="Run route:tabular-regression").click()
    served = page.locator("#served-by")
    served.wait_for()
    assert served.inner_text() == f"{CHEAPER}:1"
    assert "11.0" in page.locator("#answer").inner_text()
    assert f"${CHEAPER_MICROS / 1_000_000:.6f} per call" in page.locator(".result").inner_text()
    shot(page, tmp_path, "routed-call")
    context.close()
