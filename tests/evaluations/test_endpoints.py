"""Evaluations of an endpoint: the job calls through the endpoint's routing, each call
metered and billed as any call; the result records the versions that served its rows,
with their digests. One version serving every row ranks as that version's verified
score; rows several versions served measure the endpoint, listed apart and unranked.
An endpoint the caller may not call, or a target that is both or neither, is refused."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import pytest
from sklearn.metrics import accuracy_score
from starlette.testclient import TestClient

from modelport.api import create_app
from modelport.evaluations import repository as evaluations_repo
from modelport.evaluations.types import ServedVersion
from modelport.metering.types import BalanceScope
from tests.console.conftest import sign_in
from tests.evaluations.conftest import (
    CLASSIFICATION_COLUMNS,
    CLASSIFIER_IO,
    REGRESSOR_IO,
    Trained,
    World,
)

PRICE = 3_000
CREDIT = 10_000_000


def _deploy(world: World, headers: dict[str, str], endpoint: str, versions: list[Any]) -> None:
    client = world.client
    made = client.post("/api/endpoints", json={"name": endpoint}, headers=headers)
    assert made.status_code == 201, made.text
    deployed = client.post(
        f"/api/endpoints/{endpoint}/deployments", json={"versions": versions}, headers=headers
    )
    assert deployed.status_code == 202, deployed.text
    path = f"/api/endpoints/{endpoint}/deployments/{deployed.json()['id']}"
    deadline = time.monotonic() + 60
    while client.get(path, headers=headers).json()["state"] == "pending":
        assert time.monotonic() < deadline, "the deployment never became active"
        time.sleep(0.05)
    assert client.get(path, headers=headers).json()["state"] == "active"


def _deployer(world: World) -> dict[str, str]:
    tenancy = world.services.tenancy
    tenancy.add_member("beta", "ops", roles=["deployer"], actor="admin")
    return world.bearer(tenancy.create_key("beta", "ops", name="d", actor="admin").secret)


def test_an_endpoint_evaluation_calls_through_its_routing_and_records_who_served(
    world: World, classifier: Trained
) -> None:
    services = world.services
    world.model("acme/iris", classifier.graph, CLASSIFIER_IO, task="classification")
    world.dataset(
        "acme/iris-eval",
        {"test": {"X": classifier.x, "y": classifier.y}},
        CLASSIFICATION_COLUMNS,
        task="classification",
    )
    price = world.client.post(
        "/api/prices",
        json={"model": "acme/iris", "unit": "prediction", "unit_price_micros": PRICE},
    )
    assert price.status_code == 201, price.text
    services.metering.balances.credit(BalanceScope.TENANT, "beta", CREDIT, tenant="beta")
    _deploy(
        world,
        _deployer(world),
        "iris-live",
        [{"model": "acme/iris", "version": "1", "weight": 100}],
    )

    done = world.run(endpoint="iris-live", dataset="acme/iris-eval", output="label")
    assert done["state"] == "succeeded", done["error"]
    assert done["endpoint"] == "iris-live"
    assert done["metrics"]["accuracy"] == pytest.approx(
        accuracy_score(classifier.y, classifier.estimator.predict(classifier.x))
    )
    digest = services.registry.get_version("acme", "iris", "1").manifest_digest
    assert done["served"] == [{"model": "acme/iris", "version": "1", "digest": digest, "rows": 300}]
    assert (done["model"], done["version"], done["version_digest"]) == ("acme/iris", "1", digest)
    assert done["version_score"] is True
    # Each shard's call went through the endpoint and was billed as any call of it.
    charged = [
        e.event
        for e in world.platform.entries()
        if e.event.prediction_id.startswith(f"eval:{done['job_id']}:")
    ]
    assert len(charged) == 2 and {e.amount_micros for e in charged} == {PRICE}
    assert {e.endpoint for e in charged} == {"iris-live"}
    balance = services.metering.balances.get(BalanceScope.TENANT, "beta")
    assert balance.balance_micros == CREDIT - 2 * PRICE and balance.reserved_micros == 0
    # One version served every row: ranked as that version's verified score.
    board = world.client.get(
        "/api/leaderboards/classification/acme/iris-eval", headers=world.bearer()
    ).json()
    [entry] = board["verified"]
    assert (entry["rank"], entry["evaluation"], entry["endpoint"]) == (1, done["id"], "iris-live")
    assert board["endpoints"] == []
    assert (
        services.evaluations.best_scores("classification")[("acme/iris", "1")].value
        == (done["metrics"]["accuracy"])
    )
    # Immutable: a second write changes nothing.
    with services.database.transaction() as session:
        again = evaluations_repo.record_result(
            session,
            done["id"],
            metrics={"accuracy": 0.0},
            rows=1,
            latency_ms=1.0,
            at=datetime.now(UTC),
            served=(ServedVersion("acme/iris", "9", digest, 1),),
        )
    assert again is False
    shown = world.client.get(f"/api/evaluations/{done['id']}", headers=world.bearer()).json()
    assert (shown["metrics"], shown["served"]) == (done["metrics"], done["served"])


def test_rows_several_versions_served_are_listed_apart_and_never_a_versions_score(
    world: World, classifier: Trained
) -> None:
    services = world.services
    world.model("acme/iris", classifier.graph, CLASSIFIER_IO, task="classification")
    world.model("acme/iris", classifier.graph, CLASSIFIER_IO, version="2")
    world.dataset(
        "acme/iris-eval",
        {"test": {"X": classifier.x, "y": classifier.y}},
        CLASSIFICATION_COLUMNS,
        task="classification",
    )
    services.metering.balances.credit(BalanceScope.TENANT, "beta", CREDIT, tenant="beta")
    split = [
        {"model": "acme/iris", "version": "1", "weight": 50},
        {"model": "acme/iris", "version": "2", "weight": 50},
    ]
    _deploy(world, _deployer(world), "iris-split", split)
    submitted = world.evaluate(endpoint="iris-split", dataset="acme/iris-eval", output="label")
    assert submitted.status_code == 202, submitted.text
    evaluation = submitted.json()
    assert evaluation["state"] == "queued" and evaluation["endpoint"] == "iris-split"
    # Which version each call reaches is the split's chance: the result is written as
    # the stage writes it when both served rows.
    v1 = services.registry.get_version("acme", "iris", "1").manifest_digest
    v2 = services.registry.get_version("acme", "iris", "2").manifest_digest
    served = (ServedVersion("acme/iris", "1", v1, 256), ServedVersion("acme/iris", "2", v2, 44))
    with services.database.transaction() as session:
        assert evaluations_repo.record_result(
            session,
            evaluation["id"],
            metrics={"accuracy": 0.9, "f1_macro": 0.9},
            rows=300,
            latency_ms=2.0,
            at=datetime.now(UTC),
            served=served,
        )
    shown = world.client.get(f"/api/evaluations/{evaluation['id']}", headers=world.bearer()).json()
    assert shown["state"] == "succeeded" and shown["version_score"] is False
    assert [(s["version"], s["rows"]) for s in shown["served"]] == [("1", 256), ("2", 44)]
    board = world.client.get(
        "/api/leaderboards/classification/acme/iris-eval", headers=world.bearer()
    ).json()
    assert board["verified"] == []
    [apart] = board["endpoints"]
    assert (apart["rank"], apart["endpoint"], apart["score"]) == (None, "iris-split", 0.9)
    assert services.evaluations.best_scores("classification") == {}
    # The console lists it apart, with the versions that served it.
    browser = TestClient(create_app(services))
    sign_in(browser, world.platform.key)
    page = browser.get("/console/leaderboards/classification/acme/iris-eval")
    assert page.status_code == 200, page.text
    table = page.text.split('<table id="endpoints">', 1)[1].split("</table>", 1)[0]
    assert "iris-split" in table and "acme/iris:1 (256), acme/iris:2 (44)" in table
    verified = page.text.split('<table id="verified">', 1)[1].split("</table>", 1)[0]
    assert "No verified evaluation yet." in verified
    # Nor does the catalog count it a score.
    found = world.client.get("/api/models", params={"facets": "true", "min_score": 0.5})
    assert found.status_code == 200, found.text
    assert found.json()["items"] == []


def test_an_endpoint_the_caller_may_not_call_and_bad_targets_are_refused(
    world: World, classifier: Trained, regressor: Trained
) -> None:
    world.model("acme/iris", classifier.graph, CLASSIFIER_IO, task="classification")
    world.dataset(
        "acme/iris-eval",
        {"test": {"X": classifier.x[:20], "y": classifier.y[:20]}},
        CLASSIFICATION_COLUMNS,
        task="classification",
    )
    services = world.services
    services.tenancy.add_member("acme", "ops", roles=["owner"], actor="admin")
    acme = world.bearer(services.tenancy.create_key("acme", "ops", name="k", actor="admin").secret)
    _deploy(world, acme, "acme-only", [{"model": "acme/iris", "version": "1", "weight": 100}])
    # acme's endpoint is not beta's to call: unknown to it, as a missing one.
    for endpoint in ("acme-only", "nowhere"):
        refused = world.evaluate(endpoint=endpoint, dataset="acme/iris-eval")
        assert (refused.status_code, refused.json()["code"]) == (404, "endpoint_not_found")
    for body, field in (
        ({"model": "acme/iris", "endpoint": "acme-only"}, "model"),
        ({}, "model"),
        ({"endpoint": "acme-only", "version": "1"}, "version"),
    ):
        bad = world.evaluate(dataset="acme/iris-eval", **body)
        assert (bad.status_code, bad.json()["code"]) == (400, "invalid_target"), bad.text
        assert bad.json()["field"] == field
    # Every version an endpoint may reach is checked as a model's version is.
    world.model("acme/diabetes", regressor.graph, REGRESSOR_IO, task="regression")
    _deploy(
        world,
        _deployer(world),
        "wrong-task",
        [{"model": "acme/diabetes", "version": "1", "weight": 100}],
    )
    mismatch = world.evaluate(endpoint="wrong-task", dataset="acme/iris-eval")
    assert (mismatch.status_code, mismatch.json()["code"]) == (400, "task_mismatch")
    # acme evaluates its own endpoint.
    own = world.run(
        acme["Authorization"].removeprefix("Bearer "),
        endpoint="acme-only",
        dataset="acme/iris-eval",
        output="label",
    )
    assert own["state"] == "succeeded", own["error"]
    assert [s["version"] for s in own["served"]] == ["1"]


def test_an_endpoint_evaluation_that_served_a_private_version_is_not_shown_to_others(
    world: World, classifier: Trained
) -> None:
    services = world.services
    world.model("acme/iris", classifier.graph, CLASSIFIER_IO, task="classification")
    world.model(
        "acme/secret", classifier.graph, CLASSIFIER_IO, task="classification", visibility="private"
    )
    world.dataset(
        "acme/iris-eval",
        {"test": {"X": classifier.x[:20], "y": classifier.y[:20]}},
        CLASSIFICATION_COLUMNS,
        task="classification",
    )
    services.tenancy.add_member("acme", "ops", roles=["owner"], actor="admin")
    key = services.tenancy.create_key("acme", "ops", name="k", actor="admin").secret
    services.metering.balances.credit(BalanceScope.TENANT, "acme", CREDIT, tenant="acme")
    split = [
        {"model": "acme/iris", "version": "1", "weight": 50},
        {"model": "acme/secret", "version": "1", "weight": 50},
    ]
    _deploy(world, world.bearer(key), "acme-split", split)
    submitted = world.evaluate(key, endpoint="acme-split", dataset="acme/iris-eval", output="label")
    assert submitted.status_code == 202, submitted.text
    evaluation = submitted.json()
    public = services.registry.get_version("acme", "iris", "1").manifest_digest
    secret = services.registry.get_version("acme", "secret", "1").manifest_digest
    with services.database.transaction() as session:
        assert evaluations_repo.record_result(
            session,
            evaluation["id"],
            metrics={"accuracy": 0.9, "f1_macro": 0.9},
            rows=20,
            latency_ms=2.0,
            at=datetime.now(UTC),
            served=(
                ServedVersion("acme/iris", "1", public, 12),
                ServedVersion("acme/secret", "1", secret, 8),
            ),
        )
    path = "/api/leaderboards/classification/acme/iris-eval"
    # acme sees its own evaluation and the versions that served it.
    [own] = world.client.get(path, headers=world.bearer(key)).json()["endpoints"]
    assert [s["model"] for s in own["served"]] == ["acme/iris", "acme/secret"]
    # beta may see acme/iris but not acme/secret: the evaluation is not shown to it.
    board = world.client.get(path, headers=world.bearer()).json()
    assert board["endpoints"] == [] and board["verified"] == []
    assert "acme/secret" not in str(board)
    shown = world.client.get(f"/api/evaluations/{evaluation['id']}", headers=world.bearer())
    assert shown.status_code == 404, shown.text
