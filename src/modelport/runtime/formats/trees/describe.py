"""What a tree model file says about itself, as manifest fields: the publisher's
``push`` fills a manifest from it (on the publisher's machine, from its own file)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from modelport.errors import InvalidInput
from modelport.runtime.formats.trees.native import (
    LABEL,
    PREDICTION,
    PROBABILITIES,
    LightGBMTree,
    NativeTree,
    SklearnTree,
    XGBoostTree,
)

INPUT = "input"
READERS: dict[str, Callable[[Path], NativeTree]] = {
    "xgboost": XGBoostTree,
    "lightgbm": LightGBMTree,
    "sklearn": SklearnTree,
}


def sniff_format(path: Path) -> str | None:
    """The tree format of the file at ``path`` when its name and first bytes tell it."""
    if path.suffix == ".ubj":
        return "xgboost"
    if path.suffix == ".skops":
        return "sklearn"
    with path.open("rb") as handle:
        head = handle.read(4096)
    if path.suffix == ".json" and b'"learner"' in head:
        return "xgboost"
    if path.suffix == ".txt" and head.startswith(b"tree\nversion="):
        return "lightgbm"
    return None


def describe(fmt: str, path: Path) -> dict[str, Any]:
    """``inputs`` and ``outputs`` of the model at ``path`` (format ``fmt``)."""
    reader = READERS.get(fmt)
    if reader is None:
        raise InvalidInput(f"'{fmt}' is not a tree format", code="unknown_format")
    tree: NativeTree = reader(path)
    shape = tree.shape
    outputs: list[dict[str, Any]]
    if shape.task == "classification":
        outputs = [
            {"name": LABEL, "datatype": "INT64", "shape": [-1]},
            {"name": PROBABILITIES, "datatype": "FP32", "shape": [-1, shape.classes]},
        ]
    else:
        outputs = [{"name": PREDICTION, "datatype": "FP32", "shape": [-1]}]
    return {
        "inputs": [{"name": INPUT, "datatype": "FP32", "shape": [-1, shape.features]}],
        "outputs": outputs,
    }
