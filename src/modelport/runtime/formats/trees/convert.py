"""Tree models to ONNX, with the converters their communities keep: ``onnxmltools`` for
XGBoost and LightGBM, ``skl2onnx`` for scikit-learn. The graph's outputs are renamed to
the contract's (``native.TreeShape.output_names``) and its one input to the manifest's."""

from __future__ import annotations

from typing import Any

from modelport.runtime.formats.trees.native import NativeTree

TARGET_OPSET = 15
ML_OPSET = 3


class ConversionFailed(Exception):
    """The converter refused the model or made a graph that does not fit the contract."""


def to_onnx(kind: str, tree: NativeTree, input_name: str) -> bytes:
    """The ONNX graph of ``tree`` (a model of library ``kind``), serialized."""
    model = tree.converter_input()
    try:
        graph = _convert(kind, model, input_name, tree.shape.features)
    except Exception as exc:  # each converter raises its own errors for what it lacks
        raise ConversionFailed(f"{type(exc).__name__}: {exc}"[:300]) from exc
    wanted = tree.shape.output_names()
    outputs = list(graph.graph.output)
    if len(outputs) != len(wanted):
        raise ConversionFailed(
            f"the converted graph has {len(outputs)} outputs, the contract {len(wanted)}"
        )
    for value, name in zip(outputs, wanted, strict=True):
        _rename(graph, value.name, name)
    data: bytes = graph.SerializeToString()
    return data


def _convert(kind: str, model: Any, input_name: str, features: int) -> Any:
    if kind == "sklearn":
        from skl2onnx import convert_sklearn
        from skl2onnx.common.data_types import FloatTensorType as SklearnFloat

        options = {id(model): {"zipmap": False}} if hasattr(model, "classes_") else None
        return convert_sklearn(
            model,
            initial_types=[(input_name, SklearnFloat([None, features]))],
            target_opset={"": TARGET_OPSET, "ai.onnx.ml": ML_OPSET},
            options=options,
        )
    from onnxmltools.convert.common.data_types import FloatTensorType

    initial = [(input_name, FloatTensorType([None, features]))]
    if kind == "xgboost":
        from onnxmltools import convert_xgboost

        return convert_xgboost(model, initial_types=initial, target_opset=TARGET_OPSET)
    if kind == "lightgbm":
        from onnxmltools import convert_lightgbm

        return convert_lightgbm(
            model, initial_types=initial, target_opset=TARGET_OPSET, zipmap=False
        )
    raise ConversionFailed(f"no converter for '{kind}'")


def _rename(graph: Any, old: str, new: str) -> None:
    """Rename the value ``old`` to ``new`` everywhere in the graph."""
    if old == new:
        return
    for node in graph.graph.node:
        node.input[:] = [new if name == old else name for name in node.input]
        node.output[:] = [new if name == old else name for name in node.output]
    for value in graph.graph.output:
        if value.name == old:
            value.name = new
