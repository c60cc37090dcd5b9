"""The console shows the leaderboards (verified ranked, claims apart) and a model's
evaluations on its page (linked to their dataset's page and their board, with both
digests), as the signed-in key may read them through the API."""

from __future__ import annotations

import re

from starlette.testclient import TestClient

from modelport.api import create_app
from modelport.metering.types import BalanceScope
from tests.console.conftest import sign_in
from tests.evaluations.conftest import (
    CLASSIFICATION_COLUMNS,
    CLASSIFIER_IO,
    Trained,
    World,
)


def _rows(html: str, table: str) -> list[str]:
    body = html.split(f'<table id="{table}">', 1)[1].split("</table>", 1)[0]
    return [
        re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", row)).strip() for row in body.split("<tr>")[2:]
    ]


def test_the_console_shows_leaderboards_and_a_models_evaluations(
    world: World, classifier: Trained, weak_classifier: Trained
) -> None:
    world.model("acme/iris", classifier.graph, CLASSIFIER_IO, task="classification")
    world.model("acme/iris-weak", weak_classifier.graph, CLASSIFIER_IO)
    world.dataset(
        "acme/iris-eval",
        {"test": {"X": classifier.x, "y": classifier.y}},
        CLASSIFICATION_COLUMNS,
        task="classification",
    )
    world.services.metering.balances.credit(BalanceScope.TENANT, "beta", 10**9, tenant="beta")
    world.client.post(
        "/api/prices", json={"model": "acme/iris", "unit": "prediction", "unit_price_micros": 1500}
    )
    strong = world.run(model="acme/iris", dataset="acme/iris-eval", output="probabilities")
    world.run(model="acme/iris-weak", dataset="acme/iris-eval", output="probabilities")
    claimed = world.client.post(
        "/api/models/acme/iris-weak/versions/1/claims",
        json={
            "dataset": "acme/iris-eval",
            "dataset_version": "1",
            "split": "test",
            "metrics": {"accuracy": 0.999},
        },
    )
    assert claimed.status_code == 201, claimed.text

    browser = TestClient(create_app(world.services))
    sign_in(browser, world.platform.key)
    boards = browser.get("/console/leaderboards")
    assert boards.status_code == 200
    assert "classification on acme/iris-eval" in boards.text
    page = browser.get("/console/leaderboards/classification/acme/iris-eval")
    assert page.status_code == 200, page.text
    verified = _rows(page.text, "verified")
    assert [row.split()[:2] for row in verified] == [["1", "acme/iris"], ["2", "acme/iris-weak"]]
    assert f"{strong['metrics']['accuracy']:.4f}" in verified[0]
    assert "/ 1,000 calls" in verified[0] and "free" in verified[1]
    (claim,) = _rows(page.text, "claimed")
    assert claim.startswith("acme/iris-weak") and claim.endswith("0.9990 claimed")

    model = browser.get("/console/models/acme/iris")
    assert model.status_code == 200
    rows = _rows(model.text, "evaluations")
    assert len(rows) == 1 and "acme/iris-eval:1" in rows[0] and "succeeded" in rows[0]
    assert f"accuracy {strong['metrics']['accuracy']:.4f}" in rows[0]
    board = '<a href="/console/leaderboards/classification/acme/iris-eval">classification</a>'
    dataset = '<a href="/console/datasets/acme/iris-eval?version=1">acme/iris-eval:1</a>'
    evaluations = model.text.split('<table id="evaluations">', 1)[1].split("</table>", 1)[0]
    assert board in evaluations and dataset in evaluations
    assert strong["version_digest"][:19] in evaluations
    assert strong["dataset_digest"][:19] in evaluations
    assert browser.get("/console/datasets/acme/iris-eval?version=1").status_code == 200
    weak = browser.get("/console/models/acme/iris-weak")
    assert "Claimed by the publisher" in weak.text and "accuracy 0.9990" in weak.text
    claims = weak.text.split('<table id="claims">', 1)[1].split("</table>", 1)[0]
    assert board in claims and dataset in claims
    assert 'href="/console/datasets/acme/iris-eval"' in page.text  # the board's dataset
    # A dataset the viewer may not see has no board for it.
    missing = browser.get("/console/leaderboards/classification/acme/nothing")
    assert missing.status_code == 404
