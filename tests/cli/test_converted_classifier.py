"""A scikit-learn classifier converted with skl2onnx's defaults (its probabilities a
ZipMap: a sequence of maps), published with ``modelport push --example-input`` and no
manifest written by hand, validated, and called through ``tritonclient`` over HTTP.

The platform has no gRPC surface yet, so HTTP is the one protocol client to check.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import onnx
import pytest
import tritonclient.http as triton
from click.testing import CliRunner, Result
from tritonclient.utils import InferenceServerException

from modelport.app import Services
from modelport.cli import modelport
from tests.conftest import ADMIN_KEY, LiveServer

pytest.importorskip("skl2onnx")

AUTH = {"Authorization": f"Bearer {ADMIN_KEY}"}
REF = "acme/iris"


@pytest.fixture(autouse=True)
def _cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def iris() -> tuple[Any, np.ndarray, onnx.ModelProto]:
    """LogisticRegression on iris, converted with skl2onnx's defaults (zipmap on)."""
    from skl2onnx import to_onnx
    from sklearn.datasets import load_iris
    from sklearn.linear_model import LogisticRegression

    x, y = load_iris(return_X_y=True)
    clf = LogisticRegression(max_iter=500).fit(x, y)
    graph = to_onnx(clf, x[:1].astype(np.float32))
    assert any(node.op_type == "ZipMap" for node in graph.graph.node)
    return clf, x.astype(np.float32), graph


@pytest.fixture
def package(tmp_path: Path, iris: tuple[Any, np.ndarray, onnx.ModelProto]) -> Path:
    folder = tmp_path / "iris"
    folder.mkdir()
    onnx.save(iris[2], folder / "model.onnx")
    return folder


def cli(server: LiveServer, *args: str) -> Result:
    base = ["--url", server.url, "--api-key", ADMIN_KEY]
    return CliRunner().invoke(modelport, [*base, *args], catch_exceptions=False)


def example_file(tmp_path: Path, rows: list[list[float]]) -> Path:
    path = tmp_path / "example.json"
    path.write_text(json.dumps({"X": rows}))
    return path


def test_a_default_skl2onnx_classifier_is_pushed_validated_and_called_with_tritonclient(
    live_server: LiveServer,
    services: Services,
    package: Path,
    tmp_path: Path,
    iris: tuple[Any, np.ndarray, onnx.ModelProto],
) -> None:
    clf, x, _ = iris
    services.tenancy.create_tenant("acme", actor="admin")
    example = example_file(tmp_path, x[[0, 60, 120]].tolist())
    pushed = cli(
        live_server, "push", str(package), "--model", REF, "--version", "1",
        "--license", "MIT", "--example-input", str(example), "--json",
    )  # fmt: skip
    assert pushed.exit_code == 0, pushed.output
    manifest = json.loads(pushed.output)["manifest"]
    assert manifest["outputs"] == [
        {"name": "output_label", "datatype": "INT64", "shape": [-1]},
        {"name": "output_probability", "datatype": "FP32", "shape": [-1, 3]},
    ]
    assert manifest["postprocessing"] == {"class_labels": {"output_probability": [0, 1, 2]}}
    [computed] = manifest["examples"]
    assert computed["outputs"][0]["data"] == clf.predict(x[[0, 60, 120]]).tolist()
    np.testing.assert_allclose(
        np.array(computed["outputs"][1]["data"]).reshape(3, 3),
        clf.predict_proba(x[[0, 60, 120]]),
        atol=1e-5,
    )

    http = httpx.Client(base_url=live_server.url, headers=AUTH)
    validated = http.post(f"/api/models/{REF}/versions/1/transitions", json={"to": "validated"})
    assert validated.status_code == 201, validated.text
    report = http.get(f"/api/models/{REF}/versions/1/validation").json()
    assert report["passed"] is True and report["report"]["examples"][0]["passed"] is True

    client = triton.InferenceServerClient(url=live_server.url.removeprefix("http://"))
    try:
        client.load_model(REF, headers=dict(AUTH))
        metadata = client.get_model_metadata(REF, "1", headers=dict(AUTH))
        assert [o["name"] for o in metadata["outputs"]] == ["output_label", "output_probability"]
        rows = x[[10, 70, 140, 149]]
        for binary in (False, True):
            tensor = triton.InferInput("X", list(rows.shape), "FP32")
            tensor.set_data_from_numpy(rows, binary_data=binary)
            result = client.infer(REF, [tensor], model_version="1", headers=dict(AUTH))
            labels = result.as_numpy("output_label")
            probabilities = result.as_numpy("output_probability")
            assert labels is not None and probabilities is not None
            assert labels.dtype == np.int64 and probabilities.dtype == np.float32
            np.testing.assert_array_equal(labels, clf.predict(rows))
            np.testing.assert_allclose(probabilities, clf.predict_proba(rows), atol=1e-5)
            response = result.get_response()
            assert {o["name"]: o["datatype"] for o in response["outputs"]} == {
                "output_label": "INT64",
                "output_probability": "FP32",
            }
        # Only declared outputs exist: asking for another is refused, not answered.
        tensor = triton.InferInput("X", list(rows.shape), "FP32")
        tensor.set_data_from_numpy(rows)
        with pytest.raises(InferenceServerException, match="unknown output 'probabilities'"):
            client.infer(
                REF,
                [tensor],
                outputs=[triton.InferRequestedOutput("probabilities")],
                headers=dict(AUTH),
            )
    finally:
        client.close()
        http.close()


def test_dry_run_checks_everything_locally_and_spends_no_version(
    live_server: LiveServer, services: Services, package: Path, tmp_path: Path
) -> None:
    services.tenancy.create_tenant("acme", actor="admin")
    example = example_file(tmp_path, [[5.1, 3.5, 1.4, 0.2]])
    dry = cli(
        live_server, "push", str(package), "--model", REF, "--version", "1",
        "--license", "MIT", "--example-input", str(example), "--dry-run",
    )  # fmt: skip
    assert dry.exit_code == 0, dry.output
    assert "example(s) pass" in dry.output and "nothing was uploaded or published" in dry.output
    # Nothing reached the server: no model, no blob; version 1 is still free.
    http = httpx.Client(base_url=live_server.url, headers=AUTH)
    assert http.get(f"/api/models/{REF}").status_code == 404
    digest = "sha256:" + hashlib.sha256((package / "model.onnx").read_bytes()).hexdigest()
    assert http.head(f"/api/blobs/{digest}").status_code == 404
    http.close()
    pushed = cli(
        live_server, "push", str(package), "--model", REF, "--version", "1",
        "--license", "MIT", "--example-input", str(example),
    )  # fmt: skip
    assert pushed.exit_code == 0, pushed.output
    assert "published acme/iris:1" in pushed.output


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([[5.1, 3.5, 1.4], [6.0, 2.2, 5.0]], "does not fit the declared shape [-1, 4]"),
        ([[5.1, 3.5, 1.4, 0.2], [6.0, 2.2]], "is not a regular array"),
        ([["a", "b", "c", "d"]], "FP32 data must be numbers"),
    ],
)
def test_an_example_input_that_does_not_fit_is_refused_before_anything_is_sent(
    live_server: LiveServer, package: Path, tmp_path: Path, rows: Any, message: str
) -> None:
    example = example_file(tmp_path, rows)
    result = cli(
        live_server, "push", str(package), "--model", REF, "--version", "1",
        "--license", "MIT", "--example-input", str(example), "--dry-run",
    )  # fmt: skip
    assert result.exit_code != 0
    assert message in result.output


def test_an_npy_example_input_for_a_single_input_model(
    live_server: LiveServer, package: Path, tmp_path: Path
) -> None:
    path = tmp_path / "x.npy"
    np.save(path, np.array([[5.1, 3.5, 1.4, 0.2]]))  # float64: FP32 takes it unchanged
    result = cli(
        live_server, "push", str(package), "--model", REF, "--version", "1",
        "--license", "MIT", "--example-input", str(path), "--dry-run", "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    [example] = json.loads(result.output)["manifest"]["examples"]
    assert example["inputs"][0]["shape"] == [1, 4]
    np.save(path, np.array([[5, 3, 1, 0]], dtype=np.int64).astype(np.complex64))
    refused = cli(
        live_server, "push", str(package), "--model", REF, "--version", "1",
        "--license", "MIT", "--example-input", str(path), "--dry-run",
    )  # fmt: skip
    assert refused.exit_code != 0 and "cannot take unchanged" in refused.output


def test_publishing_into_an_owner_that_is_no_tenant_is_refused(
    live_server: LiveServer, package: Path, tmp_path: Path
) -> None:
    example = example_file(tmp_path, [[5.1, 3.5, 1.4, 0.2]])
    result = cli(
        live_server, "push", str(package), "--model", "nobody/iris", "--version", "1",
        "--license", "MIT", "--example-input", str(example),
    )  # fmt: skip
    assert result.exit_code != 0
    assert "tenant_not_found" in result.output
    assert "modelport tenants create nobody" in result.output


def test_a_graph_output_that_is_no_tensor_is_refused_naming_the_case(
    live_server: LiveServer, tmp_path: Path
) -> None:
    from tests.runtime.test_onnx_graph import sequence_model

    folder = tmp_path / "seq"
    folder.mkdir()
    onnx.save(sequence_model(), folder / "model.onnx")
    result = cli(
        live_server, "push", str(folder), "--model", REF, "--version", "1", "--license", "MIT",
        "--dry-run",
    )  # fmt: skip
    assert result.exit_code != 0
    assert "output 'seq' is a sequence of tensors, not a tensor" in result.output
    assert "UNDEFINED" not in result.output and "non_tensor_value" in result.output
