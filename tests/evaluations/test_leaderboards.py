"""Leaderboards rank verified evaluations by the task's score, with price and measured
latency beside it, and show publishers' claims apart; evaluations refuse what cannot be
scored, and respect who may read a dataset and call a model."""

from __future__ import annotations

from typing import Any

import pytest

from modelport.evaluations import service as evaluation_service
from modelport.metering.types import BalanceScope
from tests.evaluations.conftest import (
    CLASSIFICATION_COLUMNS,
    CLASSIFIER_IO,
    REGRESSOR_IO,
    Trained,
    World,
)


def _iris_world(world: World, classifier: Trained, weak: Trained) -> None:
    world.model("acme/iris", classifier.graph, CLASSIFIER_IO, task="classification")
    world.model("acme/iris-weak", weak.graph, CLASSIFIER_IO)
    world.dataset(
        "acme/iris-eval",
        {
            "test": {"X": classifier.x, "y": classifier.y},
            "small": {"X": classifier.x[:50], "y": classifier.y[:50]},
        },
        CLASSIFICATION_COLUMNS,
        task="classification",
    )
    world.services.metering.balances.credit(BalanceScope.TENANT, "beta", 10**9, tenant="beta")


def _board(world: World, path: str = "classification/acme/iris-eval", **params: Any) -> Any:
    return world.client.get(f"/api/leaderboards/{path}", params=params, headers=world.bearer())


def test_a_leaderboard_ranks_verified_evaluations_and_shows_claims_apart(
    world: World, classifier: Trained, weak_classifier: Trained
) -> None:
    _iris_world(world, classifier, weak_classifier)
    price = world.client.post(
        "/api/prices",
        json={"model": "acme/iris", "unit": "prediction", "unit_price_micros": 1_500},
    )
    assert price.status_code == 201, price.text
    weak = world.run(model="acme/iris-weak", dataset="acme/iris-eval", output="probabilities")
    strong = world.run(model="acme/iris", dataset="acme/iris-eval", output="probabilities")
    hidden = world.run(
        model="acme/iris", dataset="acme/iris-eval", output="probabilities", publish=False
    )
    assert {weak["state"], strong["state"], hidden["state"]} == {"succeeded"}
    assert strong["metrics"]["accuracy"] > weak["metrics"]["accuracy"]
    # The weak model's publisher claims a perfect score: shown, never ranked.
    claim = world.client.post(
        "/api/models/acme/iris-weak/versions/1/claims",
        json={
            "dataset": "acme/iris-eval",
            "dataset_version": "1",
            "split": "test",
            "metrics": {"accuracy": 1.0, "f1_macro": 1.0},
        },
    )
    assert claim.status_code == 201, claim.text
    assert claim.json()["kind"] == "claimed" and claim.json()["verified"] is False

    board = _board(world)
    assert board.status_code == 200, board.text
    doc = board.json()
    assert (doc["metric"], doc["higher_is_better"]) == ("accuracy", True)
    assert [(e["rank"], e["model"], e["evaluation"]) for e in doc["verified"]] == [
        (1, "acme/iris", strong["id"]),
        (2, "acme/iris-weak", weak["id"]),
    ]
    top = doc["verified"][0]
    assert top["score"] == strong["metrics"]["accuracy"] and top["verified"] is True
    assert top["price"] == {"per_1k_calls_micros": 1_500_000}
    assert top["latency_ms"] == strong["latency_ms"] > 0
    assert top["dataset_digest"] == strong["dataset_digest"]
    assert doc["verified"][1]["price"] == {}  # no price: free
    assert [(e["rank"], e["model"], e["score"]) for e in doc["claimed"]] == [
        (None, "acme/iris-weak", 1.0)
    ]
    # One split only; a split nobody evaluated has an empty board.
    assert len(_board(world, split="test").json()["verified"]) == 2
    assert _board(world, split="small").json()["verified"] == []
    listed = world.client.get("/api/leaderboards", headers=world.bearer()).json()
    assert listed["items"] == [{"task": "classification", "dataset": "acme/iris-eval"}]

    # The model's evaluations: the unpublished one only to the tenant that ran it.
    own = world.client.get("/api/models/acme/iris/evaluations", headers=world.bearer()).json()
    assert {e["id"] for e in own["items"]} == {strong["id"], hidden["id"]}
    services = world.services
    services.tenancy.create_tenant("gamma", actor="admin")
    services.tenancy.add_member("gamma", "dev", roles=["consumer"], actor="admin")
    gamma = services.tenancy.create_key("gamma", "dev", name="k", actor="admin").secret
    theirs = world.client.get(
        "/api/models/acme/iris/evaluations", headers=world.bearer(gamma)
    ).json()
    assert {e["id"] for e in theirs["items"]} == {strong["id"]}
    refused = world.client.get(f"/api/evaluations/{hidden['id']}", headers=world.bearer(gamma))
    assert (refused.status_code, refused.json()["code"]) == (404, "evaluation_not_found")


def test_a_claim_is_the_publishers_own_and_states_the_tasks_score(
    world: World, classifier: Trained, weak_classifier: Trained
) -> None:
    _iris_world(world, classifier, weak_classifier)
    body = {"dataset": "acme/iris-eval", "dataset_version": "1", "split": "test"}
    # Another tenant's key may not claim scores for acme's model.
    foreign = world.client.post(
        "/api/models/acme/iris/versions/1/claims",
        json={**body, "metrics": {"accuracy": 1.0}},
        headers=world.bearer(),
    )
    assert foreign.status_code in (403, 404), foreign.text
    for metrics in ({"f1_macro": 0.9}, {"accuracy": 0.9, "mae": 1.0}):
        bad = world.client.post(
            "/api/models/acme/iris/versions/1/claims", json={**body, "metrics": metrics}
        )
        assert (bad.status_code, bad.json()["code"]) == (400, "invalid_claim")
    unknown = world.client.post(
        "/api/models/acme/iris/versions/1/claims",
        json={**body, "split": "train", "metrics": {"accuracy": 0.9}},
    )
    assert (unknown.status_code, unknown.json()["code"]) == (400, "unknown_split")


def test_evaluations_refuse_what_cannot_be_scored_with_stable_codes(
    world: World, classifier: Trained, weak_classifier: Trained, regressor: Trained
) -> None:
    _iris_world(world, classifier, weak_classifier)
    world.model("acme/diabetes", regressor.graph, REGRESSOR_IO, task="regression")
    cases: list[tuple[dict[str, Any], int, str]] = [
        ({"model": "acme/iris", "dataset": "acme/iris-eval", "split": "train"}, 400, "unknown_split"),
        ({"model": "acme/diabetes", "dataset": "acme/iris-eval"}, 400, "task_mismatch"),
        ({"model": "acme/iris-weak", "dataset": "acme/iris-eval", "output": "nope"}, 400, "unknown_output"),
        ({"model": "acme/iris", "dataset": "acme/nothing"}, 404, "dataset_not_found"),
        ({"model": "acme/iris", "dataset": "acme/iris-eval", "dataset_version": "9"}, 404, "dataset_version_not_found"),
        ({"model": "acme/nothing", "dataset": "acme/iris-eval"}, 404, "model_not_found"),
    ]  # fmt: skip
    for body, status, code in cases:
        response = world.evaluate(**body)
        assert (response.status_code, response.json()["code"]) == (status, code), body
    # A dataset whose feature columns are not the model's inputs.
    world.dataset(
        "acme/renamed",
        {"test": {"features": classifier.x[:20], "y": classifier.y[:20]}},
        [
            {"name": "features", "datatype": "FP32", "shape": [4], "role": "feature"},
            {"name": "y", "datatype": "INT64", "role": "label"},
        ],
        task="classification",
    )
    mismatch = world.evaluate(model="acme/iris", dataset="acme/renamed")
    assert (mismatch.status_code, mismatch.json()["code"]) == (400, "column_mismatch")
    # A split file that does not hold the declared columns is refused at publish.
    digest = world.services.blobs.put(b"PAR1 not really", tenant="acme")
    manifest = {
        "task": "classification",
        "license": "MIT",
        "columns": CLASSIFICATION_COLUMNS,
        "splits": [
            {"name": "test", "rows": 3, "file": {"path": "t.parquet", "digest": digest, "size": 15}}
        ],
    }
    refused = world.client.post(
        "/api/datasets/acme/renamed/versions", json={"version": "2", "manifest": manifest}
    )
    assert refused.status_code == 400 and refused.json()["code"] in (
        "invalid_batch_file",
        "dataset_columns_mismatch",
    )
    wrong_rows = {**manifest, "splits": [{**manifest["splits"][0]}]}
    assert (
        world.client.post(
            "/api/datasets/acme/renamed/versions",
            json={
                "version": "2",
                "manifest": {**wrong_rows, "columns": [CLASSIFICATION_COLUMNS[1]]},
            },
        ).json()["code"]
        == "invalid_dataset_manifest"
    )
    # The same manifest again is a no-op; another under the same version, 409.
    same = world.client.get("/api/datasets/acme/renamed/versions/1").json()
    again = world.client.post(
        "/api/datasets/acme/renamed/versions", json={"version": "1", "manifest": same["manifest"]}
    )
    assert again.status_code == 200 and again.json()["digest"] == same["digest"]
    changed = {**same["manifest"], "license": "Apache-2.0"}
    clash = world.client.post(
        "/api/datasets/acme/renamed/versions", json={"version": "1", "manifest": changed}
    )
    assert (clash.status_code, clash.json()["code"]) == (409, "dataset_version_exists")


def test_a_private_dataset_and_an_uncallable_model_are_refused_to_other_tenants(
    world: World, classifier: Trained, weak_classifier: Trained
) -> None:
    _iris_world(world, classifier, weak_classifier)
    services = world.services
    world.dataset(
        "acme/secret-eval",
        {"test": {"X": classifier.x[:30], "y": classifier.y[:30]}},
        CLASSIFICATION_COLUMNS,
        task="classification",
        visibility="private",
    )
    # beta cannot see acme's private dataset: not listed, not readable, not usable.
    listed = world.client.get("/api/datasets", headers=world.bearer()).json()["items"]
    assert [d["name"] for d in listed] == ["iris-eval"]
    hidden = world.client.get("/api/datasets/acme/secret-eval", headers=world.bearer())
    assert (hidden.status_code, hidden.json()["code"]) == (404, "dataset_not_found")
    refused = world.evaluate(model="acme/iris", dataset="acme/secret-eval")
    assert (refused.status_code, refused.json()["code"]) == (404, "dataset_not_found")
    board = _board(world, "classification/acme/secret-eval")
    assert board.status_code == 404
    # A grant of the dataset's name shares it, as it does a model.
    grant = world.client.post(
        "/api/grants", json={"grantee": "beta", "namespace": "acme", "model": "secret-eval"}
    )
    assert grant.status_code == 201, grant.text
    granted = world.run(model="acme/iris", dataset="acme/secret-eval", output="probabilities")
    assert granted["state"] == "succeeded", granted["error"]

    # A consumer may only evaluate models it may call: a private model is unknown to it,
    world.model("acme/private", classifier.graph, CLASSIFIER_IO, visibility="private")
    private = world.evaluate(model="acme/private", dataset="acme/iris-eval")
    assert (private.status_code, private.json()["code"]) == (404, "model_not_found")
    # and another tenant's version not yet approved is refused.
    world.model("acme/iris", classifier.graph, CLASSIFIER_IO, version="2", approved=False)
    unapproved = world.evaluate(model="acme/iris", version="2", dataset="acme/iris-eval")
    assert (unapproved.status_code, unapproved.json()["code"]) == (403, "version_not_approved")
    # A key that may not call models may not evaluate them.
    services.tenancy.add_member("beta", "viewer", roles=["billing"], actor="admin")
    viewer = services.tenancy.create_key("beta", "viewer", name="v", actor="admin").secret
    no_call = world.evaluate(viewer, model="acme/iris", dataset="acme/iris-eval")
    assert no_call.status_code in (403, 404), no_call.text
    # The leaderboard leaves out evaluations of models the viewer may not see.
    services.tenancy.add_member("acme", "ops", roles=["owner"], actor="admin")
    acme = services.tenancy.create_key("acme", "ops", name="k", actor="admin").secret
    own = world.run(acme, model="acme/private", dataset="acme/iris-eval", output="probabilities")
    assert own["state"] == "succeeded", own["error"]
    admin_board = world.client.get("/api/leaderboards/classification/acme/iris-eval").json()
    assert "acme/private" in {e["model"] for e in admin_board["verified"]}
    assert "acme/private" not in {e["model"] for e in _board(world).json()["verified"]}


def test_a_failed_evaluation_job_marks_the_evaluation_failed(
    world: World, classifier: Trained, weak_classifier: Trained
) -> None:
    _iris_world(world, classifier, weak_classifier)
    world.client.post(
        "/api/prices",
        json={"model": "acme/iris", "unit": "prediction", "unit_price_micros": 10**9},
    )
    world.services.tenancy.create_tenant("poor", actor="admin")
    world.services.tenancy.add_member("poor", "app", roles=["consumer"], actor="admin")
    poor = world.services.tenancy.create_key("poor", "app", name="k", actor="admin").secret
    world.services.metering.balances.credit(BalanceScope.TENANT, "poor", 1, tenant="poor")
    done = world.run(poor, model="acme/iris", dataset="acme/iris-eval", output="probabilities")
    assert done["state"] == "failed" and done["error"]["code"] == "budget_exceeded", done
    assert done["metrics"] is None
    assert _board(world).json()["verified"] == []


def test_a_dataset_lists_only_blobs_its_tenant_holds(
    world: World, classifier: Trained, weak_classifier: Trained
) -> None:
    """Another tenant's split file, even when its digest is known, cannot be published
    into a dataset: the bytes are held per tenant, as model files are."""
    _iris_world(world, classifier, weak_classifier)
    services = world.services
    acme_split = world.client.get("/api/datasets/acme/iris-eval/versions/1").json()
    stolen = acme_split["manifest"]["splits"][0]
    services.tenancy.add_member("beta", "pub", roles=["publisher"], actor="admin")
    beta = services.tenancy.create_key("beta", "pub", name="p", actor="admin").secret
    created = world.client.post(
        "/api/datasets", json={"owner": "beta", "name": "copy"}, headers=world.bearer(beta)
    )
    assert created.status_code == 201, created.text
    manifest = {**acme_split["manifest"], "splits": [stolen]}
    refused = world.client.post(
        "/api/datasets/beta/copy/versions",
        json={"version": "1", "manifest": manifest},
        headers=world.bearer(beta),
    )
    assert (refused.status_code, refused.json()["code"]) == (400, "missing_blob")
    # Its own copy of the bytes, declared at the wrong size, is refused too.
    data = services.blobs.get(stolen["file"]["digest"])
    services.blobs.put(data, tenant="beta")
    wrong = {**stolen, "file": {**stolen["file"], "size": len(data) + 1}}
    resized = world.client.post(
        "/api/datasets/beta/copy/versions",
        json={"version": "1", "manifest": {**manifest, "splits": [wrong]}},
        headers=world.bearer(beta),
    )
    assert (resized.status_code, resized.json()["code"]) == (400, "blob_size_mismatch")
    # A namespace that is not the key's own.
    foreign = world.client.post(
        "/api/datasets", json={"owner": "acme", "name": "mine"}, headers=world.bearer(beta)
    )
    assert foreign.status_code in (403, 404), foreign.text


def test_a_cancelled_evaluation_reads_failed_and_charges_nothing(
    world: World, classifier: Trained, weak_classifier: Trained
) -> None:
    _iris_world(world, classifier, weak_classifier)
    submitted = world.evaluate(model="acme/iris", dataset="acme/iris-eval")
    assert submitted.status_code == 202, submitted.text
    evaluation = submitted.json()
    assert evaluation["state"] == "queued" and evaluation["job_id"]
    cancel = world.client.post(f"/api/jobs/{evaluation['job_id']}:cancel", headers=world.bearer())
    assert cancel.status_code == 202, cancel.text
    world.jobs.drain()
    shown = world.client.get(f"/api/evaluations/{evaluation['id']}", headers=world.bearer())
    assert (shown.json()["state"], shown.json()["error"]["code"]) == ("failed", "cancelled")
    assert not [e for e in world.platform.entries() if e.event.prediction_id.startswith("eval:")]


def test_a_split_past_the_row_bound_is_refused(
    world: World, classifier: Trained, weak_classifier: Trained, monkeypatch: pytest.MonkeyPatch
) -> None:
    _iris_world(world, classifier, weak_classifier)
    monkeypatch.setattr(evaluation_service, "MAX_ROWS", 299)
    refused = world.evaluate(model="acme/iris", dataset="acme/iris-eval")
    assert (refused.status_code, refused.json()["code"]) == (400, "split_too_large")
    small = world.evaluate(model="acme/iris", dataset="acme/iris-eval", split="small")
    assert small.status_code == 202, small.text
