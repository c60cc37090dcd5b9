"""XGBoost, LightGBM and scikit-learn models loaded as saved: converted to ONNX and
served with the original's predictions, or served by their library where the
conversion fails or disagrees; hostile and broken files refused with their codes."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from modelport.errors import ModelportError
from modelport.manifest import Manifest
from modelport.runtime.formats.registry import get_format, known_formats
from modelport.runtime.formats.trees import format as tree_format
from modelport.runtime.formats.trees.convert import ConversionFailed
from modelport.runtime.formats.trees.describe import describe, sniff_format
from modelport.runtime.formats.trees.native import XGBoostTree
from tests.runtime.formats.trees.models import Saved, manifest_of, save_all

pytest.importorskip("xgboost")
pytest.importorskip("lightgbm")
pytest.importorskip("skops")

KINDS = [
    "xgboost-multiclass-json",
    "xgboost-multiclass-ubj",
    "xgboost-binary",
    "xgboost-regression",
    "lightgbm-multiclass",
    "lightgbm-binary",
    "lightgbm-regression",
    "sklearn-forest",
    "sklearn-boosted",
]


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Saved]:
    return save_all(tmp_path_factory.mktemp("trees"))


def served(model: Saved, rows: np.ndarray, **extra: object) -> tuple[str, dict[str, np.ndarray]]:
    manifest = manifest_of(model, **extra)
    loaded = get_format(model.fmt).load({model.path.name: model.path}, manifest)
    try:
        return loaded.served_by, loaded.execute({"input": rows})
    finally:
        loaded.unload()


def assert_same(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> None:
    assert set(got) == set(want)
    for name, expected in want.items():
        assert got[name].dtype == expected.dtype, name
        if name == "label":
            np.testing.assert_array_equal(got[name], expected)
        else:
            np.testing.assert_allclose(got[name], expected, rtol=1e-4, atol=1e-4)


def test_the_tree_formats_are_installed_plugins() -> None:
    assert {"xgboost", "lightgbm", "sklearn"} <= known_formats()


@pytest.mark.parametrize("kind", KINDS)
def test_a_saved_model_is_served_through_onnx_with_the_originals_predictions(
    saved: dict[str, Saved], kind: str
) -> None:
    model = saved[kind]
    rows = model.rows[::7]
    by, got = served(model, rows)
    assert by == "onnx"
    assert_same(got, model.predict(rows))


@pytest.mark.parametrize("kind", ["xgboost-multiclass-json", "lightgbm-regression"])
def test_a_model_no_converter_takes_is_served_by_its_library(
    saved: dict[str, Saved], kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*_: object) -> bytes:
        raise ConversionFailed("this converter does not know the model")

    monkeypatch.setattr(tree_format, "to_onnx", refuse)
    model = saved[kind]
    by, got = served(model, model.rows[:9])
    assert by == "native"
    assert_same(got, model.predict(model.rows[:9]))


def test_a_conversion_that_disagrees_with_the_original_is_not_served(
    saved: dict[str, Saved], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The converted graph of another model (same inputs and outputs) answers otherwise
    on the check rows: the original serves."""
    binary = saved["lightgbm-binary"]
    other = tree_format.to_onnx("xgboost", XGBoostTree(saved["xgboost-binary"].path), "input")
    monkeypatch.setattr(tree_format, "to_onnx", lambda *_: other)
    by, got = served(binary, binary.rows)
    assert by == "native"
    assert_same(got, binary.predict(binary.rows))


def test_the_manifest_s_examples_are_among_the_check_rows(saved: dict[str, Saved]) -> None:
    model = saved["xgboost-regression"]
    rows = model.rows[:2]
    example = {
        "inputs": [
            {"name": "input", "datatype": "FP32", "shape": [2, 5], "data": rows.ravel().tolist()}
        ],
        "tolerance": {"atol": 1e-3, "rtol": 1e-3},
    }
    manifest = manifest_of(model, examples=[example])
    checked, tolerance = tree_format.check_rows(5, manifest)
    np.testing.assert_array_equal(checked[:2], rows)
    assert checked.shape == (2 + tree_format.CHECK_ROWS, 5)
    assert (tolerance.atol, tolerance.rtol) == (1e-3, 1e-3)


def test_describe_reads_the_signature_and_sniff_tells_the_format(saved: dict[str, Saved]) -> None:
    multi = describe("xgboost", saved["xgboost-multiclass-ubj"].path)
    assert multi["inputs"] == [{"name": "input", "datatype": "FP32", "shape": [-1, 4]}]
    assert multi["outputs"] == [
        {"name": "label", "datatype": "INT64", "shape": [-1]},
        {"name": "probabilities", "datatype": "FP32", "shape": [-1, 3]},
    ]
    binary = describe("lightgbm", saved["lightgbm-binary"].path)
    assert binary["outputs"][1]["shape"] == [-1, 2]
    regression = describe("sklearn", saved["sklearn-boosted"].path)
    assert regression["outputs"] == [{"name": "prediction", "datatype": "FP32", "shape": [-1]}]
    assert {name: sniff_format(saved[name].path) for name in KINDS} == {
        name: saved[name].fmt for name in KINDS
    }


def test_a_declared_output_the_model_lacks_is_refused(saved: dict[str, Saved]) -> None:
    model = saved["xgboost-regression"]
    outputs = [{"name": "probabilities", "datatype": "FP32", "shape": [-1, 2]}]
    with pytest.raises(ModelportError) as refused:
        served(model, model.rows[:1], outputs=outputs)
    assert refused.value.code == "unknown_output"


def test_a_file_the_library_cannot_read_is_refused(tmp_path: Path) -> None:
    for fmt, name, content in (
        ("xgboost", "broken.json", b'{"learner": 1}'),
        ("lightgbm", "broken.txt", b"tree\nversion=v4\nnot a model"),
        ("sklearn", "broken.skops", b"PK not a zip"),
    ):
        path = tmp_path / name
        path.write_bytes(content)
        broken = Saved(fmt, path, np.zeros((1, 4), np.float32), lambda rows: {})
        with pytest.raises(ModelportError) as refused:
            get_format(fmt).load({name: path}, hand_written(broken))
        assert refused.value.code == "bad_model_file", (fmt, refused.value.message)


def hand_written(model: Saved) -> Manifest:
    """A manifest written by hand for a file no library could describe."""
    data = model.path.read_bytes()
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    return Manifest.model_validate(
        {
            "format": model.fmt,
            "license": "MIT",
            "files": [{"path": model.path.name, "digest": digest, "size": len(data)}],
            "inputs": [{"name": "input", "datatype": "FP32", "shape": [-1, 4]}],
            "outputs": [{"name": "label", "datatype": "INT64", "shape": [-1]}],
        }
    )


def test_a_skops_file_holding_a_type_the_platform_does_not_build_is_refused(
    tmp_path: Path,
) -> None:
    """skops would build any type the caller trusts; the platform trusts only a tree
    ensemble's own: a pipeline calling an arbitrary function is refused unread."""
    import os

    import skops.io as sio
    from sklearn.preprocessing import FunctionTransformer

    path = tmp_path / "hostile.skops"
    sio.dump(FunctionTransformer(os.system), path)
    model = Saved("sklearn", path, np.zeros((1, 4), np.float32), lambda rows: {})
    with pytest.raises(ModelportError) as refused:
        get_format("sklearn").load({path.name: path}, hand_written(model))
    assert refused.value.code == "unsafe_content"
    assert "system" in refused.value.message
