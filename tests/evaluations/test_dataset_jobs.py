"""A dataset split as a tensor batch's input (``jobs.tensor_batch``): its feature columns
feed the model's inputs by name, the outputs equal those of the same rows uploaded as a
Parquet file, the dataset's digest is recorded on the job, every shard is metered; an
unknown split, a dataset the caller may not read and features that are not the model's
inputs are refused with stable codes (at submission, and again when the shards start).
On SQLite and PostgreSQL."""

from __future__ import annotations

import io
from collections import Counter
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from modelport.jobs.service import Submission
from modelport.jobs.types import JobState, StageSpec
from modelport.metering.types import BalanceScope
from tests.evaluations.conftest import (
    CLASSIFICATION_COLUMNS,
    CLASSIFIER_IO,
    REGRESSION_COLUMNS,
    Trained,
    World,
    parquet_bytes,
)

PIPELINE = [
    {"name": "shards", "implementation": "tensor_shards", "params": {"shard_rows": 128}},
    {"name": "publish", "implementation": "tensor_publish"},
]


def _submit(world: World, key: str | None = None, **body: Any) -> Any:
    return world.client.post(
        "/api/jobs",
        json={"target": {"model": "acme/iris"}, "pipeline": PIPELINE, **body},
        headers=world.bearer(key),
    )


def _run(world: World, **body: Any) -> tuple[str, dict[str, Any]]:
    response = _submit(world, **body)
    assert response.status_code == 202, response.text
    job_id = str(response.json()["id"])
    world.jobs.drain()
    services = world.services
    job = services.jobs.get(None, job_id)
    assert job.state is JobState.SUCCEEDED, job
    manifest = services.jobs.output(job)
    assert manifest is not None
    return job_id, manifest


def _scored(world: World, manifest: dict[str, Any]) -> pa.Table:
    blobs = world.services.blobs
    return pa.concat_tables(
        [pq.read_table(io.BytesIO(blobs.get(s["digest"]))) for s in manifest["shards"]]
    )


def _world(world: World, classifier: Trained) -> dict[str, Any]:
    world.model("acme/iris", classifier.graph, CLASSIFIER_IO, task="classification")
    world.services.metering.balances.credit(BalanceScope.TENANT, "beta", 10**9, tenant="beta")
    return world.dataset(
        "acme/iris-rows",
        {"test": {"X": classifier.x, "y": classifier.y}},
        CLASSIFICATION_COLUMNS,
        task="classification",
    )


def test_a_job_over_a_dataset_split_answers_as_the_same_rows_uploaded(
    world: World, classifier: Trained
) -> None:
    version = _world(world, classifier)
    split = {"dataset": "acme/iris-rows:1", "split": "test"}
    job_id, manifest = _run(world, input_dataset=split)
    assert manifest["dataset"] == {
        "ref": "acme/iris-rows:1",
        "split": "test",
        "digest": version["digest"],
    }
    assert manifest["rows"] == len(classifier.x) and manifest["format"] == "parquet"
    # The same rows uploaded as a file (the features alone) answer the same.
    upload = world.services.files.create(
        "beta", "user_data", "rows.parquet", parquet_bytes({"X": classifier.x})
    )
    _, uploaded = _run(world, input_digest=upload.digest)
    from_split, from_file = _scored(world, manifest), _scored(world, uploaded)
    assert from_split.column_names == ["probabilities", "label"]
    assert from_split.equals(from_file)
    labels = from_split.column("label").to_numpy()
    np.testing.assert_array_equal(labels, classifier.estimator.predict(classifier.x))
    # Billed as any job: one metered call per shard, to the submitting tenant.
    charged = Counter(
        e.event.prediction_id
        for e in world.platform.entries()
        if e.event.prediction_id.startswith(f"batch:{job_id}:")
    )
    shards = -(-len(classifier.x) // 128)
    assert charged == Counter({f"batch:{job_id}:{i}": 1 for i in range(shards)})
    shown = world.client.get(f"/api/jobs/{job_id}", headers=world.bearer()).json()
    assert shown["progress"]["rows_done"] == len(classifier.x)
    assert shown["input_dataset"] == {**split, "digest": version["digest"]}


def test_a_dataset_split_input_is_refused_with_stable_codes(
    world: World, classifier: Trained
) -> None:
    _world(world, classifier)
    world.dataset(
        "acme/secret-rows",
        {"test": {"X": classifier.x[:10], "y": classifier.y[:10]}},
        CLASSIFICATION_COLUMNS,
        task="classification",
        visibility="private",
    )
    cases = [
        ({"dataset": "acme/iris-rows:1", "split": "validation"}, 400, "unknown_split"),
        ({"dataset": "acme/secret-rows:1", "split": "test"}, 404, "dataset_not_found"),
        ({"dataset": "acme/iris-rows:9", "split": "test"}, 404, "dataset_version_not_found"),
        ({"dataset": "acme/iris-rows", "split": "test"}, 400, "invalid_dataset_ref"),
    ]
    for split, status, code in cases:
        refused = _submit(world, input_dataset=split)
        assert (refused.status_code, refused.json()["code"]) == (status, code), split
    # A split with a file too, or outside a tensor batch, is no input.
    upload = world.services.files.create(
        "beta", "user_data", "rows.parquet", parquet_bytes({"X": classifier.x[:2]})
    )
    both = _submit(
        world,
        input_dataset={"dataset": "acme/iris-rows:1", "split": "test"},
        input_digest=upload.digest,
    )
    assert (both.status_code, both.json()["code"]) == (400, "invalid_job_input")
    default = world.client.post(
        "/api/jobs",
        json={
            "target": {"model": "acme/iris"},
            "input_dataset": {"dataset": "acme/iris-rows:1", "split": "test"},
        },
        headers=world.bearer(),
    )
    assert (default.status_code, default.json()["code"]) == (400, "invalid_job_input")
    # Feature columns that are not the model's inputs are refused at submission,
    world.dataset(
        "acme/diabetes-rows",
        {"test": {"X": np.zeros((4, 10), np.float32), "y": np.zeros(4)}},
        REGRESSION_COLUMNS,
        task="regression",
    )
    wide = {"dataset": "acme/diabetes-rows:1", "split": "test"}
    mismatch = _submit(world, input_dataset=wide)
    assert (mismatch.status_code, mismatch.json()["code"]) == (400, "column_mismatch")
    # and fail the job when the shards start (a job submitted past the first check, as
    # one over an endpoint whose version changed since would be).
    services = world.services
    principal = services.authenticator.authenticate(world.platform.key)
    job, _ = services.jobs.submit(
        principal,
        Submission(
            target_kind="model",
            target="acme/iris",
            pipeline=[StageSpec("shards", "tensor_shards"), StageSpec("publish", "tensor_publish")],
            dataset=wide["dataset"],
            split=wide["split"],
        ),
    )
    world.jobs.drain()
    failed = services.jobs.get(None, job.id)
    assert failed.state is JobState.FAILED and failed.error_code == "column_mismatch", failed
    # A grant shares a private dataset for jobs as it does for evaluations.
    grant = world.client.post(
        "/api/grants", json={"grantee": "beta", "namespace": "acme", "model": "secret-rows"}
    )
    assert grant.status_code == 201, grant.text
    _, granted = _run(world, input_dataset={"dataset": "acme/secret-rows:1", "split": "test"})
    assert granted["rows"] == 10
