"""Open Inference Protocol gRPC messages <-> the ``/v2`` request records and numpy: pure
code, no I/O.

A ``ModelInferRequest`` becomes the same ``api.v2.types.InferenceRequest`` the REST codec
makes, so the one ``validate_request`` checks both surfaces' calls alike. Input data comes
either as ``raw_input_contents`` (one entry per input, the binary tensor extension's
layout: little-endian, row-major; BYTES as 4-byte lengths and bytes), read as numpy views
without copying, or as typed ``contents``. Outputs always go back as
``raw_output_contents``, as Triton answers.

Every malformed request raises ``InvalidInput`` with the REST codec's stable codes
(``invalid_request``, ``invalid_datatype``, ``invalid_tensor_shape``, ``tensor_too_large``,
``invalid_tensor_data``, ``invalid_binary_data``, ``duplicate_input``,
``duplicate_output``, ``unsupported_parameter``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from google.protobuf.message import Message

from modelport.api.grpc import oip_pb2 as pb
from modelport.api.v2.codec import DEFAULT_MAX_ELEMENTS, MAX_RANK
from modelport.api.v2.types import InferenceRequest, RequestInput, RequestOutput
from modelport.errors import Internal, InvalidInput
from modelport.manifest import TensorSpec
from modelport.runtime.tensors import decode_binary_tensor, encode_binary_tensor, numpy_dtype

_CONTENTS = {
    "BOOL": "bool_contents",
    "INT8": "int_contents",
    "INT16": "int_contents",
    "INT32": "int_contents",
    "INT64": "int64_contents",
    "UINT8": "uint_contents",
    "UINT16": "uint_contents",
    "UINT32": "uint_contents",
    "UINT64": "uint64_contents",
    "FP32": "fp32_contents",
    "FP64": "fp64_contents",
    "BYTES": "bytes_contents",
}
"""The ``InferTensorContents`` field of each datatype (FP16 has none: raw only)."""

_SHARED_MEMORY = ("shared_memory_region", "shared_memory_byte_size", "shared_memory_offset")


def parameters_of(parameters: Mapping[str, Message]) -> dict[str, Any]:
    """An ``InferParameter`` (or ``ModelRepositoryParameter``) map as plain values."""
    found: dict[str, Any] = {}
    for key, value in parameters.items():
        choice = value.WhichOneof("parameter_choice")
        found[key] = None if choice is None else getattr(value, choice)
    return found


def parse_infer_request(
    request: pb.ModelInferRequest, *, max_elements: int = DEFAULT_MAX_ELEMENTS
) -> InferenceRequest:
    """The request as the REST codec's record; ``max_elements`` bounds the declared
    elements of all inputs together, checked before any data is read."""
    raw = request.raw_input_contents
    if not request.inputs:
        raise InvalidInput("request needs at least one input", code="invalid_request")
    if raw and len(raw) != len(request.inputs):
        raise InvalidInput(
            f"raw_input_contents has {len(raw)} entries for {len(request.inputs)} inputs",
            code="invalid_binary_data",
        )
    inputs: list[RequestInput] = []
    seen: set[str] = set()
    total = 0
    for index, tensor in enumerate(request.inputs):
        name = tensor.name
        if not name:
            raise InvalidInput(f"inputs[{index}] needs a name", code="invalid_request")
        if name in seen:
            raise InvalidInput(f"input '{name}' appears more than once", code="duplicate_input")
        seen.add(name)
        datatype = tensor.datatype
        numpy_dtype(name, datatype)  # refuses an unknown datatype before the shape
        shape = _shape(name, tensor.shape, max_elements)
        total += math.prod(shape)
        if total > max_elements:
            raise InvalidInput(
                f"input '{name}': shape {list(shape)} brings the request to {total} elements, "
                f"above the limit of {max_elements}",
                code="tensor_too_large",
            )
        parameters = parameters_of(tensor.parameters)
        if any(key in parameters for key in _SHARED_MEMORY):
            raise InvalidInput(
                f"input '{name}': shared memory is not supported", code="unsupported_parameter"
            )
        if raw:
            if tensor.HasField("contents"):
                raise InvalidInput(
                    f"input '{name}': has both contents and raw_input_contents",
                    code="invalid_tensor_data",
                )
            array = decode_binary_tensor(name, datatype, list(shape), raw[index])
        else:
            array = _from_contents(name, datatype, shape, tensor.contents)
        inputs.append(
            RequestInput(
                name=name,
                datatype=datatype,
                shape=shape,
                data=array,
                nbytes=_payload_bytes(array),
                parameters=parameters,
            )
        )
    return InferenceRequest(
        inputs=tuple(inputs),
        outputs=_outputs(request.outputs),
        id=request.id or None,
        parameters=parameters_of(request.parameters),
    )


def encode_infer_response(
    outputs: Mapping[str, np.ndarray],
    *,
    model_name: str,
    model_version: str,
    request_id: str | None,
    requested: Sequence[RequestOutput],
    declared: Sequence[TensorSpec],
) -> pb.ModelInferResponse:
    """The outputs asked for (all declared ones when none were), in that order, as raw
    contents; an output is only ever returned in its declared datatype (else
    ``Internal`` ``output_datatype_mismatch``), and one the model did not produce is
    ``Internal`` ``missing_output``."""
    types = {spec.name: spec.datatype for spec in declared}
    names = [r.name for r in requested] if requested else [spec.name for spec in declared]
    response = pb.ModelInferResponse(
        model_name=model_name, model_version=model_version, id=request_id or ""
    )
    for name in names:
        if name not in outputs:
            raise Internal(f"the model did not produce output '{name}'", code="missing_output")
        array = np.asarray(outputs[name])
        datatype = _datatype(array)
        wanted = types.get(name)
        if wanted is None:
            raise Internal(
                f"output '{name}' is not declared by the model", code="undeclared_output"
            )
        if datatype != wanted:
            raise Internal(
                f"output '{name}' is declared {wanted}, but the model produced {datatype}",
                code="output_datatype_mismatch",
            )
        response.outputs.add(name=name, datatype=datatype, shape=array.shape)
        response.raw_output_contents.append(encode_binary_tensor(array))
    return response


def text_response(
    text: str,
    *,
    model_name: str,
    model_version: str,
    request_id: str,
    parameters: Mapping[str, Any],
) -> pb.ModelInferResponse:
    """One chunk of a generative stream: ``text_output`` (BYTES, shape [1]) and the
    response's ``parameters`` (``triton_final_response`` and the like)."""
    response = pb.ModelInferResponse(
        model_name=model_name, model_version=model_version, id=request_id
    )
    if text:
        response.outputs.add(name=TEXT_OUTPUT, datatype="BYTES", shape=[1])
        response.raw_output_contents.append(encode_binary_tensor(np.array([text], dtype=object)))
    for key, value in parameters.items():
        set_parameter(response.parameters[key], value)
    return response


TEXT_INPUT = "text_input"
"""The prompt of a streamed generative call (BYTES, one element), as Triton's generative
backends name it."""
TEXT_OUTPUT = "text_output"
"""The text of each streamed chunk (BYTES, one element)."""


def set_parameter(target: pb.InferParameter, value: Any) -> None:
    """Set an ``InferParameter`` from a plain value (bool, int, float or text)."""
    if isinstance(value, bool):
        target.bool_param = value
    elif isinstance(value, int):
        target.int64_param = value
    elif isinstance(value, float):
        target.double_param = value
    else:
        target.string_param = str(value)


def _datatype(array: np.ndarray) -> str:
    if array.dtype.kind in ("O", "S", "U"):
        return "BYTES"
    for name, field in _DTYPES.items():
        if array.dtype == field:
            return name
    raise Internal(
        f"an output has dtype {array.dtype}, which the protocol cannot carry",
        code="unsupported_output_dtype",
    )


_DTYPES = {
    name: np.dtype(kind)
    for name, kind in (
        ("BOOL", np.bool_),
        ("UINT8", np.uint8),
        ("UINT16", np.uint16),
        ("UINT32", np.uint32),
        ("UINT64", np.uint64),
        ("INT8", np.int8),
        ("INT16", np.int16),
        ("INT32", np.int32),
        ("INT64", np.int64),
        ("FP16", np.float16),
        ("FP32", np.float32),
        ("FP64", np.float64),
    )
}


def _shape(name: str, dims: Sequence[int], max_elements: int) -> tuple[int, ...]:
    if len(dims) > MAX_RANK:
        raise InvalidInput(
            f"input '{name}': shape has {len(dims)} dimensions, at most {MAX_RANK} allowed",
            code="invalid_tensor_shape",
        )
    for dim in dims:
        if dim < 0:
            raise InvalidInput(
                f"input '{name}': shape {list(dims)} has a negative dimension",
                code="invalid_tensor_shape",
            )
        if dim > max_elements:
            raise InvalidInput(
                f"input '{name}': dimension {dim} is above the limit of {max_elements} elements",
                code="tensor_too_large",
            )
    return tuple(dims)


def _from_contents(
    name: str, datatype: str, shape: tuple[int, ...], contents: pb.InferTensorContents
) -> np.ndarray:
    field = _CONTENTS.get(datatype)
    if field is None:
        raise InvalidInput(
            f"input '{name}': {datatype} travels as raw_input_contents only",
            code="invalid_tensor_data",
        )
    values = getattr(contents, field)
    count = math.prod(shape)
    if len(values) != count:
        raise InvalidInput(
            f"input '{name}': shape {list(shape)} needs {count} elements, "
            f"{field} has {len(values)}",
            code="invalid_tensor_data",
        )
    if datatype == "BYTES":
        array = np.empty(count, dtype=object)
        array[:] = list(values)
        return array.reshape(shape)
    dtype = numpy_dtype(name, datatype)
    try:
        # Out-of-range values (300 for a UINT8) are refused, not wrapped.
        wide = np.asarray(values)
        array = wide.astype(dtype)
        if wide.size and dtype.kind in "iu" and not np.array_equal(array, wide):
            raise OverflowError
    except (OverflowError, ValueError):
        raise InvalidInput(
            f"input '{name}': a value does not fit {datatype}", code="invalid_tensor_data"
        ) from None
    return array.reshape(shape)


def _payload_bytes(array: np.ndarray) -> int:
    if array.dtype.kind == "O":
        return sum(len(item) for item in array.reshape(-1).tolist())
    return int(array.nbytes)


def _outputs(
    items: Sequence[pb.ModelInferRequest.InferRequestedOutputTensor],
) -> tuple[RequestOutput, ...]:
    parsed: list[RequestOutput] = []
    seen: set[str] = set()
    for index, item in enumerate(items):
        if not item.name:
            raise InvalidInput(f"outputs[{index}] needs a name", code="invalid_request")
        if item.name in seen:
            raise InvalidInput(
                f"output '{item.name}' is requested more than once", code="duplicate_output"
            )
        seen.add(item.name)
        parameters = parameters_of(item.parameters)
        if any(key in parameters for key in (*_SHARED_MEMORY, "classification")):
            raise InvalidInput(
                f"output '{item.name}': shared memory and classification are not supported",
                code="unsupported_parameter",
            )
        parameters.pop("binary_data", None)  # always raw here
        parsed.append(RequestOutput(name=item.name, parameters=parameters))
    return tuple(parsed)
