"""Evaluation fixtures: the metering test platform (acme publishing, beta consuming)
with real scikit-learn models converted to ONNX, datasets of Parquet splits, and a job
runner the test drives."""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest

from tests.jobs.conftest import Jobs
from tests.metering.conftest import Platform, approve, make_platform

pytest.importorskip("skl2onnx")
pytest.importorskip("pyarrow")


@dataclass(frozen=True)
class Trained:
    """A scikit-learn model, its ONNX graph, and the data of a split."""

    estimator: Any
    graph: onnx.ModelProto
    x: np.ndarray
    y: np.ndarray


@pytest.fixture(scope="session")
def classifier() -> Trained:
    """Logistic regression on iris, twice over with noise: 300 rows, two shards."""
    from skl2onnx import to_onnx
    from sklearn.datasets import load_iris
    from sklearn.linear_model import LogisticRegression

    x, y = load_iris(return_X_y=True)
    rng = np.random.default_rng(7)
    x = np.concatenate([x, x + rng.normal(0, 0.4, x.shape)]).astype(np.float32)
    y = np.concatenate([y, y]).astype(np.int64)
    clf = LogisticRegression(max_iter=300).fit(x[::3], y[::3])
    graph = to_onnx(clf, x[:1], options={"zipmap": False}, target_opset=17)
    return Trained(clf, graph, x, y)


@pytest.fixture(scope="session")
def weak_classifier(classifier: Trained) -> Trained:
    """A classifier fitted on shuffled labels: it scores worse on the same split."""
    from skl2onnx import to_onnx
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(3)
    clf = LogisticRegression(max_iter=300).fit(classifier.x, rng.permutation(classifier.y))
    graph = to_onnx(clf, classifier.x[:1], options={"zipmap": False}, target_opset=17)
    return Trained(clf, graph, classifier.x, classifier.y)


@pytest.fixture(scope="session")
def regressor() -> Trained:
    from skl2onnx import to_onnx
    from sklearn.datasets import load_diabetes
    from sklearn.linear_model import LinearRegression

    x, y = load_diabetes(return_X_y=True)
    x = x.astype(np.float32)
    reg = LinearRegression().fit(x[::2], y[::2])
    graph = to_onnx(reg, x[:1], target_opset=17)
    return Trained(reg, graph, x, y.astype(np.float64))


def parquet_bytes(columns: dict[str, np.ndarray]) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    arrays = {}
    for name, values in columns.items():
        if values.dtype == object:
            arrays[name] = pa.array(list(values), type=pa.string())
        elif values.ndim == 2:
            flat = pa.array(values.reshape(-1))
            arrays[name] = pa.FixedSizeListArray.from_arrays(flat, values.shape[1])
        else:
            arrays[name] = pa.array(values)
    out = io.BytesIO()
    pq.write_table(pa.table(arrays), out, row_group_size=128)
    return out.getvalue()


CLASSIFIER_IO = {
    "inputs": [{"name": "X", "datatype": "FP32", "shape": [-1, 4]}],
    "outputs": [
        {"name": "probabilities", "datatype": "FP32", "shape": [-1, 3]},
        {"name": "label", "datatype": "INT64", "shape": [-1]},
    ],
}
REGRESSOR_IO = {
    "inputs": [{"name": "X", "datatype": "FP32", "shape": [-1, 10]}],
    "outputs": [{"name": "variable", "datatype": "FP32", "shape": [-1, 1]}],
}


@dataclass
class World:
    """The platform, its runner, and helpers that publish models and datasets."""

    jobs: Jobs

    @property
    def platform(self) -> Platform:
        return self.jobs.platform

    @property
    def services(self) -> Any:
        return self.platform.services

    @property
    def client(self) -> Any:
        return self.platform.client

    def bearer(self, key: str | None = None) -> dict[str, str]:
        return {"Authorization": f"Bearer {key or self.platform.key}"}

    def model(
        self,
        ref: str,
        graph: onnx.ModelProto,
        io_spec: dict[str, Any],
        *,
        version: str = "1",
        visibility: str = "public",
        task: str | None = None,
        approved: bool = True,
    ) -> None:
        owner, name = ref.split("/")
        publisher = self.platform.publisher
        if ref not in publisher.models:
            body = {"owner": owner, "name": name, "license": "MIT", "visibility": visibility}
            if task is not None:
                body["task"] = task
            created = self.client.post("/api/models", json=body)
            assert created.status_code == 201, created.text
            publisher.models.add(ref)
        publisher.publish(ref, version, graph, **io_spec)
        if approved:
            approve(self.services, owner, name, version)

    def dataset(
        self,
        ref: str,
        splits: dict[str, dict[str, np.ndarray]],
        columns: list[dict[str, Any]],
        *,
        task: str,
        visibility: str = "public",
        version: str = "1",
    ) -> dict[str, Any]:
        owner, name = ref.split("/")
        created = self.client.post(
            "/api/datasets", json={"owner": owner, "name": name, "visibility": visibility}
        )
        assert created.status_code in (201, 409), created.text
        entries = []
        for split, data in splits.items():
            blob = parquet_bytes(data)
            digest = self.services.blobs.put(blob, tenant=owner)
            entries.append(
                {
                    "name": split,
                    "rows": len(next(iter(data.values()))),
                    "file": {"path": f"{split}.parquet", "digest": digest, "size": len(blob)},
                }
            )
        manifest = {"task": task, "license": "CC-BY-4.0", "columns": columns, "splits": entries}
        response = self.client.post(
            f"/api/datasets/{ref}/versions", json={"version": version, "manifest": manifest}
        )
        assert response.status_code == 201, response.text
        return response.json()

    def evaluate(self, key: str | None = None, **body: Any) -> Any:
        body.setdefault("dataset_version", "1")
        body.setdefault("split", "test")
        return self.client.post("/api/evaluations", json=body, headers=self.bearer(key))

    def run(self, key: str | None = None, **body: Any) -> dict[str, Any]:
        """Submit an evaluation, run the jobs, and answer the evaluation as it ended."""
        response = self.evaluate(key, **body)
        assert response.status_code == 202, response.text
        self.jobs.drain()
        found = self.client.get(response.headers["Location"], headers=self.bearer(key))
        assert found.status_code == 200, found.text
        return dict(found.json())


CLASSIFICATION_COLUMNS = [
    {"name": "X", "datatype": "FP32", "shape": [4], "role": "feature"},
    {"name": "y", "datatype": "INT64", "role": "label"},
]
REGRESSION_COLUMNS = [
    {"name": "X", "datatype": "FP32", "shape": [10], "role": "feature"},
    {"name": "y", "datatype": "FP64", "role": "label"},
]


@pytest.fixture
def world(tmp_path: Path, database_url: str) -> Iterator[World]:
    platform = make_platform(tmp_path / "home", database_url, job_runner_concurrency=0)
    yield World(Jobs(platform))
    platform.close_client()
    platform.services.close()
