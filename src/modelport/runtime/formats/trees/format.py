"""The ``xgboost``, ``lightgbm`` and ``sklearn`` format plugins (tensor contract).

``load`` reads the model with its library, converts it to ONNX and compares the two on
the check rows: the manifest's examples, then rows drawn with a fixed seed around them.
Served by onnxruntime when every check row agrees within the examples' tolerance; by the
library otherwise (the converter failed or disagreed), which is logged with the reason.
``TreeModel.served_by`` says which.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Literal

import numpy as np

from modelport.errors import Unprocessable
from modelport.manifest import Manifest, Tolerance
from modelport.runtime.formats.onnx import OnnxFormat
from modelport.runtime.formats.trees.convert import ConversionFailed, to_onnx
from modelport.runtime.formats.trees.native import (
    LABEL,
    PREDICTION,
    PROBABILITIES,
    LightGBMTree,
    NativeTree,
    SklearnTree,
    XGBoostTree,
    classified,
    regressed,
)

_log = logging.getLogger(__name__)
CHECK_ROWS = 256
"""Rows drawn for the conversion check besides the examples' own."""
SEED = 20261205


class TreeModel:
    """A tree model, served by onnxruntime (``served_by == "onnx"``) or its library."""

    def __init__(
        self,
        tree: NativeTree,
        onnx: object | None,
        outputs: list[str],
        input_name: str,
        size_hint: int,
    ) -> None:
        self._tree = tree
        self._onnx = onnx
        self._outputs = outputs
        self._input = input_name
        self._size_hint = size_hint
        self.served_by: Literal["onnx", "native"] = "native" if onnx is None else "onnx"

    def execute(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        features = np.asarray(inputs[self._input], dtype=np.float32)
        answer = self._tree.predict(features) if self._onnx is None else self._converted(features)
        return {name: answer[name] for name in self._outputs}

    def _converted(self, features: np.ndarray) -> dict[str, np.ndarray]:
        session = self._onnx
        assert session is not None
        if self._tree.shape.task == "classification":
            # The class index from the probabilities, as the library answers it: a
            # converter's own label may be the class's name.
            [probabilities] = session.run([PROBABILITIES], {self._input: features})  # type: ignore[attr-defined]
            return classified(probabilities)
        [values] = session.run([PREDICTION], {self._input: features})  # type: ignore[attr-defined]
        return regressed(values)

    def memory_bytes(self) -> int:
        return self._size_hint

    def unload(self) -> None:
        self._onnx = None


class TreeFormat:
    """Loads one tree library's saved models (see the module docstring)."""

    name = ""
    suffixes: tuple[str, ...] = ()

    def __init__(self, *, intra_op_threads: int = 0) -> None:
        self._onnx = OnnxFormat(intra_op_threads=intra_op_threads)

    def read(self, path: Path) -> NativeTree:
        """The model at ``path``, by the library."""
        raise NotImplementedError

    def estimate_memory(self, manifest: Manifest) -> int:
        declared = manifest.resources.host_memory_bytes
        if declared:
            return declared
        # The library's copy and the converted graph side by side.
        return 3 * sum(f.size for f in manifest.files) + (16 << 20)

    def model_file(self, files: dict[str, Path], manifest: Manifest) -> Path:
        entry = manifest.runtime.get("entrypoint")
        if entry:
            if entry not in files:
                raise Unprocessable(
                    f"entrypoint '{entry}' is not among the files", code="bad_entry"
                )
            return files[entry]
        found = [p for name, p in files.items() if name.endswith(self.suffixes)]
        if len(found) != 1:
            raise Unprocessable(
                f"a {self.name} manifest needs exactly one {' or '.join(self.suffixes)} "
                "file or runtime.entrypoint",
                code="bad_entry",
            )
        return found[0]

    def load(self, files: dict[str, Path], manifest: Manifest) -> TreeModel:
        tree = self.read(self.model_file(files, manifest))
        if len(manifest.inputs) != 1:
            raise Unprocessable(
                f"a {self.name} model takes one input, the feature matrix", code="bad_signature"
            )
        input_name = manifest.inputs[0].name
        offered = set(tree.shape.output_names())
        for spec in manifest.outputs:
            if spec.name not in offered:
                raise Unprocessable(
                    f"the manifest declares output '{spec.name}'; a {tree.shape.task} model "
                    f"of format {self.name} answers {', '.join(sorted(offered))}",
                    code="unknown_output",
                    output=spec.name,
                )
        outputs = [spec.name for spec in manifest.outputs]
        session = self._converted(tree, manifest, input_name)
        return TreeModel(tree, session, outputs, input_name, self.estimate_memory(manifest))

    def _converted(self, tree: NativeTree, manifest: Manifest, input_name: str) -> object | None:
        """An onnxruntime session of the converted model, or None where it cannot serve."""
        try:
            graph = to_onnx(self.name, tree, input_name)
        except ConversionFailed as exc:
            _log.warning("%s model served by its library: no ONNX conversion (%s)", self.name, exc)
            return None
        session: object = self._onnx.session(graph)
        rows, tolerance = check_rows(tree.shape.features, manifest)
        converted = TreeModel(tree, session, list(tree.shape.output_names()), input_name, 0)
        expected = tree.predict(rows)
        got = converted.execute({input_name: rows})
        for name, want in expected.items():
            if not np.allclose(got[name], want, atol=tolerance.atol, rtol=tolerance.rtol):
                _log.warning(
                    "%s model served by its library: the converted graph's %s differ from "
                    "the original's",
                    self.name,
                    name,
                )
                return None
        return session


def check_rows(features: int, manifest: Manifest) -> tuple[np.ndarray, Tolerance]:
    """The examples' rows and ``CHECK_ROWS`` drawn around them (a fixed seed), with the
    tightest tolerance an example asks for."""
    given = [
        np.asarray(tensor.data, dtype=np.float32).reshape(-1, features)
        for example in manifest.examples
        for tensor in example.inputs
        if tensor.datatype.startswith(("FP", "INT", "UINT")) and tensor.shape[-1:] == [features]
    ]
    base = np.concatenate(given) if given else np.zeros((1, features), dtype=np.float32)
    spread = np.maximum(base.std(axis=0), 1.0)
    rng = np.random.default_rng(SEED)
    drawn = base.mean(axis=0) + rng.normal(size=(CHECK_ROWS, features)) * 2 * spread
    rows = np.concatenate([base, drawn.astype(np.float32)])
    tolerances = [example.tolerance for example in manifest.examples] or [Tolerance()]
    tightest = Tolerance(atol=min(t.atol for t in tolerances), rtol=min(t.rtol for t in tolerances))
    return rows, tightest


class XGBoostFormat(TreeFormat):
    """XGBoost models saved by ``save_model`` as JSON or UBJSON."""

    name = "xgboost"
    suffixes = (".json", ".ubj")

    def read(self, path: Path) -> NativeTree:
        return XGBoostTree(path)


class LightGBMFormat(TreeFormat):
    """LightGBM boosters saved by ``save_model`` (text)."""

    name = "lightgbm"
    suffixes = (".txt",)

    def read(self, path: Path) -> NativeTree:
        return LightGBMTree(path)


class SklearnFormat(TreeFormat):
    """scikit-learn tree ensembles saved by ``skops.io.dump``."""

    name = "sklearn"
    suffixes = (".skops",)

    def read(self, path: Path) -> NativeTree:
        return SklearnTree(path)


__all__ = ["LABEL", "PREDICTION", "PROBABILITIES", "TreeFormat", "TreeModel"]
