"""Open Inference Protocol REST bodies <-> numpy, with the binary tensor data extension.

Request::

    <JSON header>{"id"?, "parameters"?, "inputs": [...], "outputs"?: [...]}<binary data>

When inputs carry ``parameters.binary_data_size``, their bytes follow the JSON
header back to back in input order, and the ``Inference-Header-Content-Length``
HTTP header gives the JSON header's length. Responses use the same layout for
outputs returned as binary. This matches ``tritonclient.http`` byte for byte.

The functions here run for every call: plain dict handling and orjson, no
per-request pydantic models; binary tensors are numpy views of the body.
Every malformed request raises :class:`~modelport.errors.InvalidInput` with a
stable ``code`` and a message naming the offending tensor.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import orjson

from modelport.api.v2.types import (
    INFERENCE_HEADER,
    EncodedResponse,
    InferenceRequest,
    RequestInput,
    RequestOutput,
)
from modelport.errors import Internal, InvalidInput
from modelport.manifest import TensorSpec
from modelport.runtime.tensors import (
    NUMPY_TO_OIP,
    bytes_as_text,
    decode_binary_tensor,
    decode_json_tensor,
    encode_binary_tensor,
    json_float_data,
    loads_json,
    numpy_dtype,
)

DEFAULT_MAX_ELEMENTS = 1 << 26
"""Default cap on the elements of all input tensors of one request together."""

MAX_RANK = 32
"""Most dimensions a tensor may declare."""

JSON_CONTENT_TYPE = "application/json"
BINARY_CONTENT_TYPE = "application/octet-stream"

_HEADER_RE = re.compile(r"[0-9]{1,19}")
_SHARED_MEMORY = ("shared_memory_region", "shared_memory_byte_size", "shared_memory_offset")
_UNSUPPORTED_OUTPUT_PARAMETERS = (*_SHARED_MEMORY, "classification")
_NO_BINARY = memoryview(b"")


def parse_infer_request(
    body: bytes,
    header_length: str | int | None = None,
    *,
    max_elements: int = DEFAULT_MAX_ELEMENTS,
) -> InferenceRequest:
    """Parse an inference request body.

    ``header_length`` is the raw ``Inference-Header-Content-Length`` header
    value (None when absent: the whole body is JSON). ``max_elements`` bounds
    the declared elements of all inputs together, checked before any data is
    read. Raises ``InvalidInput`` with code ``invalid_json``,
    ``invalid_request``, ``invalid_header_length``, ``invalid_datatype``,
    ``invalid_tensor_shape``, ``tensor_too_large``, ``invalid_tensor_data``,
    ``invalid_binary_data``, ``duplicate_input``, ``duplicate_output`` or
    ``unsupported_parameter``.
    """
    if header_length is None and type(body) is bytes:
        # All JSON (the common case): no views to cut.
        doc = _load_json(body)
        binary = _NO_BINARY
    else:
        view = memoryview(body)
        json_end = _json_length(header_length, len(view))
        doc = _load_json(view[:json_end])
        binary = view[json_end:]
    if not isinstance(doc, dict):
        raise InvalidInput("request body must be a JSON object", code="invalid_request")

    parameters = _parameters(doc.get("parameters"), "request")
    binary_data_output = parameters.pop("binary_data_output", False)
    if not isinstance(binary_data_output, bool):
        raise InvalidInput(
            "parameter 'binary_data_output' must be true or false", code="invalid_request"
        )
    request_id = doc.get("id")
    if request_id is not None and not isinstance(request_id, str):
        raise InvalidInput("'id' must be a string", code="invalid_request")

    inputs = _parse_inputs(doc.get("inputs"), binary, max_elements)
    return InferenceRequest(
        inputs=inputs,
        outputs=_parse_outputs(doc.get("outputs")),
        id=request_id,
        parameters=parameters,
        binary_data_output=binary_data_output,
    )


def encode_infer_response(
    outputs: Mapping[str, np.ndarray],
    *,
    model_name: str,
    model_version: str | None = None,
    request_id: str | None = None,
    requested: Sequence[RequestOutput] = (),
    binary_data_output: bool = False,
    parameters: Mapping[str, Any] | None = None,
    declared: Sequence[TensorSpec] | None = None,
) -> EncodedResponse:
    """Encode a model's outputs as an inference response.

    With ``requested`` (the request's ``outputs``) only those are returned,
    in that order; otherwise the ``declared`` outputs (the manifest's), in declared
    order, or every entry of ``outputs`` when ``declared`` is None. With ``declared``,
    an output is only ever returned in its declared datatype: another one raises
    ``Internal`` (code ``output_datatype_mismatch``), as does a BYTES element that is
    neither bytes nor text (never its ``repr``). An output goes as
    binary when its ``binary_data`` says so, else per ``binary_data_output``;
    BYTES outputs that are not valid UTF-8 have no JSON form and always go as
    binary. NaN and infinities are written as the literals ``NaN``, ``Infinity`` and
    ``-Infinity``, as Triton writes them and as requests may carry them, so float
    outputs round-trip (``null`` would read back as nothing). Raises ``Internal``
    (code ``missing_output`` / ``unsupported_output_dtype``) when the model did
    not produce a requested output or produced a dtype OIP cannot name.
    """
    if requested:
        selection = [
            (r.name, binary_data_output if r.binary_data is None else r.binary_data)
            for r in requested
        ]
    elif declared is not None:
        selection = [(spec.name, binary_data_output) for spec in declared]
    else:
        selection = [(name, binary_data_output) for name in outputs]
    datatypes = None if declared is None else {spec.name: spec.datatype for spec in declared}

    entries: list[dict[str, Any]] = []
    chunks: list[bytes] = []
    for name, binary in selection:
        if name not in outputs:
            raise Internal(f"the model produced no output '{name}'", code="missing_output")
        array = np.asarray(outputs[name])
        datatype = _output_datatype(name, array)
        if datatypes is not None and datatypes.get(name) != datatype:
            raise _undeclared(name, datatype, datatypes.get(name))
        entry: dict[str, Any] = {"name": name, "datatype": datatype, "shape": list(array.shape)}
        if not binary:
            data = _json_data(array, datatype)
            if data is None:
                binary = True
            else:
                entry["data"] = data
        if binary:
            raw = encode_binary_tensor(array)
            chunks.append(raw)
            entry["parameters"] = {"binary_data_size": len(raw)}
        entries.append(entry)

    doc: dict[str, Any] = {"model_name": model_name}
    if model_version is not None:
        doc["model_version"] = model_version
    if request_id is not None:
        doc["id"] = request_id
    if parameters:
        doc["parameters"] = dict(parameters)
    doc["outputs"] = entries
    header = orjson.dumps(doc, option=orjson.OPT_SERIALIZE_NUMPY)
    if not chunks:
        return EncodedResponse(header, {"Content-Type": JSON_CONTENT_TYPE})
    return EncodedResponse(
        b"".join([header, *chunks]),
        {"Content-Type": BINARY_CONTENT_TYPE, INFERENCE_HEADER: str(len(header))},
    )


def _json_length(header_length: str | int | None, body_size: int) -> int:
    if header_length is None:
        return body_size
    if isinstance(header_length, bool) or not isinstance(header_length, (str, int)):
        raise InvalidInput(f"{INFERENCE_HEADER} must be an integer", code="invalid_header_length")
    if isinstance(header_length, str):
        text = header_length.strip()
        if not _HEADER_RE.fullmatch(text):
            raise InvalidInput(
                f"{INFERENCE_HEADER} must be a non-negative integer, got {header_length[:32]!r}",
                code="invalid_header_length",
            )
        header_length = int(text)
    if not 0 <= header_length <= body_size:
        raise InvalidInput(
            f"{INFERENCE_HEADER} is {header_length}, but the body is {body_size} bytes",
            code="invalid_header_length",
        )
    return header_length


def _load_json(raw: bytes | memoryview) -> Any:
    # NaN, Infinity and -Infinity are accepted, as Triton does (``loads_json``).
    try:
        return loads_json(raw)
    except ValueError as exc:
        raise InvalidInput(f"request body is not valid JSON: {exc}", code="invalid_json") from None


def _parameters(value: Any, owner: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidInput(f"{owner}: 'parameters' must be an object", code="invalid_request")
    return dict(value)


def _parse_inputs(items: Any, binary: memoryview, max_elements: int) -> tuple[RequestInput, ...]:
    if not isinstance(items, list) or not items:
        raise InvalidInput("request needs a non-empty 'inputs' array", code="invalid_request")
    parsed: list[RequestInput] = []
    seen: set[str] = set()
    cursor = 0
    total = 0
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise InvalidInput(f"inputs[{index}] must be an object", code="invalid_request")
        name = item.get("name")
        if not isinstance(name, str) or not name:
            raise InvalidInput(f"inputs[{index}] needs a 'name' string", code="invalid_request")
        if name in seen:
            raise InvalidInput(f"input '{name}' appears more than once", code="duplicate_input")
        seen.add(name)
        datatype = item.get("datatype")
        if not isinstance(datatype, str):
            raise InvalidInput(
                f"input '{name}': needs a 'datatype' string", code="invalid_datatype"
            )
        numpy_dtype(name, datatype)  # refuses an unknown datatype before the shape
        shape = _shape(name, item.get("shape"), max_elements)
        count = math.prod(shape)
        total += count
        if total > max_elements:
            raise InvalidInput(
                f"input '{name}': shape {list(shape)} brings the request to {total} elements, "
                f"above the limit of {max_elements}",
                code="tensor_too_large",
            )
        given = item.get("parameters")
        # Most inputs have no parameters: skip the copy and the lookups.
        parameters = {} if given is None else _input_parameters(name, given)
        size = parameters.pop("binary_data_size", None) if parameters else None
        if size is None:
            if "data" not in item:
                raise InvalidInput(
                    f"input '{name}': needs 'data' or parameters.binary_data_size",
                    code="invalid_tensor_data",
                )
            array = decode_json_tensor(name, datatype, list(shape), item["data"])
        else:
            if isinstance(size, bool) or not isinstance(size, int) or size < 0:
                raise InvalidInput(
                    f"input '{name}': binary_data_size must be a non-negative integer",
                    code="invalid_binary_data",
                )
            if "data" in item:
                raise InvalidInput(
                    f"input '{name}': has both 'data' and binary_data_size",
                    code="invalid_tensor_data",
                )
            if size > len(binary) - cursor:
                raise InvalidInput(
                    f"input '{name}': binary_data_size is {size}, but only "
                    f"{len(binary) - cursor} bytes of binary data remain",
                    code="invalid_binary_data",
                )
            chunk = binary[cursor : cursor + size]
            cursor += size
            array = decode_binary_tensor(name, datatype, list(shape), chunk)
        parsed.append(
            RequestInput(
                name=name,
                datatype=datatype,
                shape=shape,
                data=array,
                nbytes=_payload_bytes(array),
                parameters=parameters,
            )
        )
    if cursor != len(binary):
        raise InvalidInput(
            f"{len(binary) - cursor} bytes of binary data follow the JSON header "
            "that no input's binary_data_size accounts for",
            code="invalid_binary_data",
        )
    return tuple(parsed)


def _input_parameters(name: str, value: Any) -> dict[str, Any]:
    parameters = _parameters(value, f"input '{name}'")
    if any(key in parameters for key in _SHARED_MEMORY):
        raise InvalidInput(
            f"input '{name}': shared memory is not supported", code="unsupported_parameter"
        )
    return parameters


def _shape(name: str, value: Any, max_elements: int) -> tuple[int, ...]:
    if not isinstance(value, list):
        raise InvalidInput(
            f"input '{name}': 'shape' must be an array of integers", code="invalid_tensor_shape"
        )
    if len(value) > MAX_RANK:
        raise InvalidInput(
            f"input '{name}': shape has {len(value)} dimensions, at most {MAX_RANK} allowed",
            code="invalid_tensor_shape",
        )
    for dim in value:
        if isinstance(dim, bool) or not isinstance(dim, int):
            raise InvalidInput(
                f"input '{name}': shape {value} must hold integers", code="invalid_tensor_shape"
            )
        if dim < 0:
            raise InvalidInput(
                f"input '{name}': shape {value} has a negative dimension",
                code="invalid_tensor_shape",
            )
        if dim > max_elements:
            raise InvalidInput(
                f"input '{name}': dimension {dim} is above the limit of {max_elements} elements",
                code="tensor_too_large",
            )
    return tuple(value)


def _payload_bytes(array: np.ndarray) -> int:
    if array.dtype.kind == "O":
        return sum(len(item) for item in array.reshape(-1).tolist())
    return int(array.nbytes)


def _parse_outputs(items: Any) -> tuple[RequestOutput, ...]:
    if items is None:
        return ()
    if not isinstance(items, list):
        raise InvalidInput("'outputs' must be an array", code="invalid_request")
    parsed: list[RequestOutput] = []
    seen: set[str] = set()
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise InvalidInput(f"outputs[{index}] must be an object", code="invalid_request")
        name = item.get("name")
        if not isinstance(name, str) or not name:
            raise InvalidInput(f"outputs[{index}] needs a 'name' string", code="invalid_request")
        if name in seen:
            raise InvalidInput(
                f"output '{name}' is requested more than once", code="duplicate_output"
            )
        seen.add(name)
        parameters = _parameters(item.get("parameters"), f"output '{name}'")
        unsupported = [key for key in _UNSUPPORTED_OUTPUT_PARAMETERS if key in parameters]
        if unsupported:
            raise InvalidInput(
                f"output '{name}': parameter '{unsupported[0]}' is not supported",
                code="unsupported_parameter",
            )
        binary = parameters.pop("binary_data", None)
        if binary is not None and not isinstance(binary, bool):
            raise InvalidInput(
                f"output '{name}': binary_data must be true or false", code="invalid_request"
            )
        parsed.append(RequestOutput(name=name, binary_data=binary, parameters=parameters))
    return tuple(parsed)


def _undeclared(name: str, datatype: str, declared: str | None) -> Internal:
    if declared is None:
        return Internal(f"output '{name}' is not declared by the model", code="undeclared_output")
    return Internal(
        f"output '{name}' is declared {declared}, but the model produced {datatype}",
        code="output_datatype_mismatch",
        output=name,
        declared=declared,
    )


def _output_datatype(name: str, array: np.ndarray) -> str:
    if array.dtype.kind in ("O", "S", "U"):
        return "BYTES"
    # A native dtype is found as it is; only others need their native twin.
    datatype = NUMPY_TO_OIP.get(array.dtype) or NUMPY_TO_OIP.get(array.dtype.newbyteorder("="))
    if datatype is None:
        raise Internal(
            f"output '{name}' has dtype {array.dtype}, which the protocol cannot carry",
            code="unsupported_output_dtype",
        )
    return datatype


def _json_data(array: np.ndarray, datatype: str) -> Any:
    """Flat JSON data: a native contiguous array orjson writes directly, or None
    for BYTES that are not valid UTF-8."""
    if datatype == "BYTES":
        return bytes_as_text(array)
    if array.dtype.isnative:
        # The same flat C-order array (a copy where not contiguous), without the
        # cost of ascontiguousarray's dtype handling.
        flat = array.reshape(-1)
    else:
        flat = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("=")).reshape(-1)
    return json_float_data(flat) if flat.dtype.kind == "f" else flat
