"""Which tree formats can load here, answered without importing their libraries."""

from __future__ import annotations

import importlib.util

TREES_EXTRA = "modelport[trees]"
TREE_FORMATS: dict[str, tuple[str, ...]] = {
    "xgboost": (".json", ".ubj"),
    "lightgbm": (".txt",),
    "sklearn": (".skops",),
}
"""The tree formats and the suffixes of their model files."""
LIBRARIES = {"xgboost": "xgboost", "lightgbm": "lightgbm", "sklearn": "skops"}
"""The module each tree format's library is imported as."""


def tree_installed(fmt: str) -> bool:
    """Whether format ``fmt``'s library and the ONNX converters are installed."""
    needed = (LIBRARIES[fmt], "onnxmltools", "skl2onnx")
    return all(importlib.util.find_spec(module) is not None for module in needed)
