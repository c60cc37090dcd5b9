"""The marketplace's pages: datasets and prompt templates as the signed-in key may see
them (another tenant's private one neither listed nor opened; the publisher's own
drafts shown to it), and the playground's routed call (``route:<task>``), which names
the model that served it and quotes that model's price."""

from __future__ import annotations

import re

from starlette.testclient import TestClient

from tests.console.conftest import (
    MODEL,
    PRICE_MICROS,
    Console,
    browser_client,
    csrf_of,
    member_with_key,
    sign_in,
)
from tests.console.market import (
    CHEAPER,
    CHEAPER_MICROS,
    DRAFT_DATASET,
    PRIVATE_DATASET,
    PRIVATE_TEMPLATE,
    PUBLIC_DATASET,
    PUBLIC_TEMPLATE,
    cheaper_model,
    publish_assets,
)


def _text(html: str, element_id: str) -> str:
    """The text of the element ``element_id`` (a table, list or value), tags dropped."""
    found = re.search(rf'id="{element_id}"[^>]*>(.*?)</(table|ol|ul|dd|p)>', html, re.S)
    assert found, f"no #{element_id} on the page"
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", found[1])).strip()


def _signed_in(console: Console, key: str) -> TestClient:
    client = browser_client(console)
    sign_in(client, key)
    return client


def test_another_tenants_private_assets_are_neither_listed_nor_opened(console: Console) -> None:
    published = publish_assets(console)
    beta = _signed_in(console, console.beta_key)
    nav = beta.get("/console/models").text
    assert 'href="/console/datasets"' in nav and 'href="/console/templates"' in nav

    datasets = beta.get("/console/datasets")
    assert datasets.status_code == 200
    listed = _text(datasets.text, "assets")
    assert PUBLIC_DATASET in listed and "regression" in listed and "CC-BY-4.0" in listed
    assert PRIVATE_DATASET not in listed and DRAFT_DATASET not in listed
    page = beta.get(f"/console/datasets/{PUBLIC_DATASET}")
    assert page.status_code == 200
    assert published[PUBLIC_DATASET]["digest"] in _text(page.text, "versions")
    assert "Bytes test 3 test.parquet sha256:" in _text(page.text, "splits")
    assert _text(page.text, "columns").endswith("x feature FP32 4 y label FP32 scalar")
    assert beta.get(f"/console/datasets/{PRIVATE_DATASET}").status_code == 404
    assert beta.get(f"/console/datasets/{DRAFT_DATASET}").status_code == 404

    templates = beta.get("/console/templates")
    listed = _text(templates.text, "assets")
    assert PUBLIC_TEMPLATE in listed and "Apache-2.0" in listed
    assert PRIVATE_TEMPLATE not in listed
    page = beta.get(f"/console/templates/{PUBLIC_TEMPLATE}")
    assert page.status_code == 200
    assert published[PUBLIC_TEMPLATE]["digest"] in _text(page.text, "versions")
    assert "user Say hello to {{name}} in {{language}}." in _text(page.text, "messages")
    variables = _text(page.text, "variables")
    assert "name yes" in variables and "language no English" in variables
    missing = beta.get(f"/console/templates/{PRIVATE_TEMPLATE}")
    assert missing.status_code == 404 and "(template_not_found)" in missing.text
    assert "Say hello" not in missing.text  # the page is the API's 404, nothing more


def test_the_publisher_sees_its_private_assets_and_drafts(console: Console) -> None:
    publish_assets(console)
    key, _ = member_with_key(console.platform, "acme", "pat")
    acme = _signed_in(console, key)
    mine = acme.get("/console/datasets?owner=acme")
    listed = _text(mine.text, "assets")
    assert PUBLIC_DATASET in listed and PRIVATE_DATASET in listed
    assert f"{DRAFT_DATASET} private draft (no version yet)" in listed
    draft = acme.get(f"/console/datasets/{DRAFT_DATASET}")
    assert draft.status_code == 200
    assert f"POST /api/datasets/{DRAFT_DATASET}/versions" in _text(draft.text, "draft")
    assert PRIVATE_TEMPLATE in _text(acme.get("/console/templates").text, "assets")
    assert acme.get(f"/console/templates/{PRIVATE_TEMPLATE}").status_code == 200


def _run(client: TestClient, url: str, **route: str) -> tuple[int, str]:
    page = client.get(url)
    assert "route:tabular-regression" in page.text
    form = {"csrf_token": csrf_of(page.text), "input:x": "1, 2, 3, 4", **route}
    response = client.post(f"{url}/playground?version=1", data=form)
    return response.status_code, response.text


def test_the_playground_calls_a_task_alias_and_names_the_model_that_served_it(
    console: Console,
) -> None:
    cheaper_model(console)
    beta = _signed_in(console, console.beta_key)
    url = f"/console/models/{MODEL}"
    status, html = _run(beta, url, route="1", prefer="cheapest", max_price="0.01")
    assert status == 200, html
    assert _text(html, "served-by") == f"{CHEAPER}:1"  # not the page's own model
    assert f"${CHEAPER_MICROS / 1_000_000:.6f} per call" in html
    answer = re.search(r'<pre id="answer">(.*?)</pre>', html, re.S)
    assert answer and "2.0" in answer[1] and "5.0" in answer[1]
    [entry] = console.platform.entries()  # billed once, as the model that served it
    assert (entry.event.model, entry.event.version) == (CHEAPER, "1")
    assert entry.event.amount_micros == CHEAPER_MICROS

    # No model meets the preferences: the API's answer says why of each candidate.
    status, html = _run(beta, url, route="1", prefer="cheapest", max_price="0.0005")
    assert status == 422, html
    error = _text(html, "call-error")
    assert f"{MODEL}:1: price {PRICE_MICROS} is above max_price 500" in error
    assert f"{CHEAPER}:1: price {CHEAPER_MICROS} is above max_price 500" in error
    # A preference that is not one is the form's own clear error; nothing is called.
    status, html = _run(beta, url, route="1", max_latency_ms="soon")
    assert status == 400 and "max_latency_ms must be a positive number" in html
    # Unticked, the page's own model is called, as before.
    status, html = _run(beta, url, prefer="cheapest", max_price="0.0005")
    assert status == 200 and 'id="served-by"' not in html
    assert f"${PRICE_MICROS / 1_000_000:.6f} per call" in html


def test_the_run_button_names_what_it_runs(console: Console) -> None:
    beta = _signed_in(console, console.beta_key)
    url = f"/console/models/{MODEL}"
    page = beta.get(f"{url}?version=1").text
    button = re.search(r'<button type="submit" id="run"([^>]*)>(.*?)</button>', page)
    assert button, "the playground has no Run button"
    assert button[2] == "Run version 1"  # routing unticked: the page's own version
    assert 'data-own="Run version 1"' in button[1]
    assert 'data-routed="Run route:tabular-regression"' in button[1]  # what the script shows
    # Sent back ticked (a failed routed call), the page names the alias it ran.
    status, html = _run(beta, url, route="1", max_latency_ms="soon")
    assert status == 400
    again = re.search(r'<button type="submit" id="run"[^>]*>(.*?)</button>', html)
    assert again and again[1] == "Run route:tabular-regression"
