"""What an ONNX graph declares, read with ``onnx`` alone (no session, nothing run).

Used where a manifest is built from a graph (``modelport push``) and where the runtime
loads one. The manifest describes tensors only; two things here bridge the gap:

- **ZipMap outputs.** skl2onnx ends a classifier's probabilities, by default, in a
  ``ZipMap`` node (``ai.onnx.ml``): a sequence of maps from class label to probability,
  one map per row, which no tensor datatype describes. Its input is the plain
  ``[batch, classes]`` probability tensor, in the order of the node's class labels. The
  runtime serves such an output as that tensor (``FP32 [-1, classes]``, ``unzip``), and
  ``push`` declares it so, with its labels (``Signature.class_labels``).
- **Other non-tensor values** (sequences, maps, optionals, sparse tensors) and tensors of
  an element type no manifest datatype names are refused with a message that names the
  case and what to do (``NonTensorValue``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import onnx

from modelport.errors import InvalidInput

ONNX_DATATYPES = {
    "FLOAT": "FP32",
    "DOUBLE": "FP64",
    "FLOAT16": "FP16",
    "INT8": "INT8",
    "INT16": "INT16",
    "INT32": "INT32",
    "INT64": "INT64",
    "UINT8": "UINT8",
    "UINT16": "UINT16",
    "UINT32": "UINT32",
    "UINT64": "UINT64",
    "BOOL": "BOOL",
    "STRING": "BYTES",
}
"""ONNX TensorProto element types by name -> Open Inference Protocol datatypes."""

ML_DOMAIN = "ai.onnx.ml"

ZIPMAP_ADVICE = (
    "convert the classifier with skl2onnx's zipmap option off "
    "(to_onnx(clf, X, options={id(clf): {'zipmap': False}})) to get a [batch, classes] "
    "tensor, or drop the output from the graph"
)
"""How to turn a sequence of maps (a classifier's ZipMap) into a tensor."""


@dataclass(frozen=True)
class ZipMap:
    """A graph output made by a ZipMap node."""

    output: str
    """The graph output: a sequence of maps, one per row."""
    source: str
    """The ZipMap's input: the ``[batch, classes]`` float tensor."""
    labels: tuple[int | str, ...]
    """The class labels, in the order of the source's columns."""


@dataclass(frozen=True)
class Signature:
    """A graph's inputs and outputs as manifest tensor specs (``-1`` for a free dim)."""

    inputs: list[dict[str, Any]]
    outputs: list[dict[str, Any]]
    class_labels: dict[str, list[int | str]]
    """For each output served from a ZipMap: its class labels, in column order."""


def find_zipmaps(model: onnx.ModelProto) -> dict[str, ZipMap]:
    """The graph outputs produced directly by a ZipMap node, by output name."""
    outputs = {value.name for value in model.graph.output}
    found: dict[str, ZipMap] = {}
    for node in model.graph.node:
        if node.op_type != "ZipMap" or node.domain != ML_DOMAIN or not node.output:
            continue
        if node.output[0] not in outputs or len(node.input) != 1:
            continue
        attributes = {a.name: a for a in node.attribute}
        labels: tuple[int | str, ...]
        if "classlabels_int64s" in attributes:
            labels = tuple(int(v) for v in attributes["classlabels_int64s"].ints)
        elif "classlabels_strings" in attributes:
            labels = tuple(v.decode("utf-8") for v in attributes["classlabels_strings"].strings)
        else:
            continue
        found[node.output[0]] = ZipMap(node.output[0], node.input[0], labels)
    return found


def signature(model: onnx.ModelProto, filename: str) -> Signature:
    """The graph's inputs (initializers left out) and outputs, ZipMap outputs as
    ``FP32 [-1, classes]``. Raises ``InvalidInput`` for anything else that is not a
    tensor of a datatype the manifest names."""
    zipmaps = find_zipmaps(model)
    initializers = {t.name for t in model.graph.initializer}
    inputs = [_spec(v, filename, "input") for v in model.graph.input if v.name not in initializers]
    outputs: list[dict[str, Any]] = []
    labels: dict[str, list[int | str]] = {}
    for value in model.graph.output:
        zipmap = zipmaps.get(value.name)
        if zipmap is not None:
            outputs.append(
                {"name": value.name, "datatype": "FP32", "shape": [-1, len(zipmap.labels)]}
            )
            labels[value.name] = list(zipmap.labels)
        else:
            outputs.append(_spec(value, filename, "output"))
    return Signature(inputs, outputs, labels)


def unzip(model: onnx.ModelProto, names: set[str]) -> onnx.ModelProto:
    """A copy of ``model`` whose ZipMap outputs among ``names`` are their probability
    tensors (``FP32 [N, classes]``) under the same names. Raises ``ValueError`` for a
    name that is not a ZipMap output."""
    zipmaps = find_zipmaps(model)
    unknown = sorted(names - set(zipmaps))
    if unknown:
        raise ValueError(f"not ZipMap outputs: {', '.join(unknown)}")
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    graph = copy.graph
    kept = [n for n in graph.node if not (n.op_type == "ZipMap" and n.output[0] in names)]
    for name in sorted(names):
        # An Identity keeps the output's name while the ZipMap goes; the source may
        # feed other nodes too.
        kept.append(onnx.helper.make_node("Identity", [zipmaps[name].source], [name]))
    del graph.node[:]
    graph.node.extend(kept)
    for index, value in enumerate(graph.output):
        if value.name in names:
            classes = len(zipmaps[value.name].labels)
            graph.output[index].CopyFrom(
                onnx.helper.make_tensor_value_info(
                    value.name, onnx.TensorProto.FLOAT, [None, classes]
                )
            )
    return copy


def describe_type(type_proto: onnx.TypeProto) -> str:
    """A value type in words: ``a tensor``, ``a sequence of maps``..."""
    kind = type_proto.WhichOneof("value")
    if kind == "tensor_type":
        return "a tensor"
    if kind == "sparse_tensor_type":
        return "a sparse tensor"
    if kind == "map_type":
        return "a map"
    if kind == "optional_type":
        return "an optional " + describe_type(type_proto.optional_type.elem_type).split(" ", 1)[1]
    if kind == "sequence_type":
        inner = describe_type(type_proto.sequence_type.elem_type).split(" ", 1)[1]
        return f"a sequence of {inner}s"
    return "a value of unknown type"


def non_tensor_value(name: str, role: str, described: str, where: str) -> InvalidInput:
    """The error for an input or output that is not a tensor."""
    if role == "output" and described == "a sequence of maps":
        advice = f"it looks like skl2onnx's ZipMap of a classifier's probabilities; {ZIPMAP_ADVICE}"
    else:
        advice = (
            f"the platform serves tensors only: change the graph so that {role} {name!r} "
            "is a tensor" + (", or drop the output from the graph" if role == "output" else "")
        )
    return InvalidInput(
        f"{where}: {role} {name!r} is {described}, not a tensor, and no manifest "
        f"datatype describes it; {advice}",
        code="non_tensor_value",
        tensor=name,
        role=role,
        found=described,
    )


def _spec(value: onnx.ValueInfoProto, filename: str, role: str) -> dict[str, Any]:
    described = describe_type(value.type)
    if described != "a tensor":
        raise non_tensor_value(value.name, role, described, filename)
    tensor = value.type.tensor_type
    elem = onnx.TensorProto.DataType.Name(tensor.elem_type)
    if elem not in ONNX_DATATYPES:
        raise InvalidInput(
            f"{filename}: {role} {value.name!r} is a tensor of element type {elem}, which "
            "no manifest datatype describes; cast it in the graph to one of "
            f"{', '.join(sorted(ONNX_DATATYPES))}",
            code="unsupported_datatype",
            tensor=value.name,
            role=role,
        )
    shape = [d.dim_value if d.HasField("dim_value") else -1 for d in tensor.shape.dim]
    return {"name": value.name, "datatype": ONNX_DATATYPES[elem], "shape": shape}
