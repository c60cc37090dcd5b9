"""The client side of the Open Inference Protocol REST body, with binary tensor data.

The server side (parsing requests, encoding responses) is ``modelport.api.v2.codec``;
this is its mirror for talking to another server: modelport, Triton or MLServer.
Requests always carry their inputs as binary tensor data and ask for binary
outputs, as ``tritonclient.http`` does::

    <JSON header>{"id", "parameters": {"binary_data_output": true, ...},
                  "inputs": [{"name", "datatype", "shape",
                              "parameters": {"binary_data_size": n}}], "outputs"?}<bytes>

with ``Inference-Header-Content-Length`` giving the JSON header's length. Responses
may mix binary and JSON outputs. Tensors come from ``modelport.runtime.tensors``.
A malformed response raises ``ValueError`` naming what is wrong (the backend turns it
into its own error).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import orjson

from modelport.errors import InvalidInput
from modelport.runtime.tensors import (
    decode_binary_tensor,
    decode_json_tensor,
    encode_binary_tensor,
    loads_json,
    oip_datatype,
)

INFERENCE_HEADER = "Inference-Header-Content-Length"


def encode_request(
    inputs: Mapping[str, np.ndarray],
    *,
    outputs: Sequence[str] | None = None,
    parameters: Mapping[str, Any] | None = None,
    request_id: str = "",
) -> tuple[bytes, dict[str, str]]:
    """An inference request body and the headers that must go with it."""
    entries: list[dict[str, Any]] = []
    chunks: list[bytes] = []
    for name, value in inputs.items():
        array = np.asarray(value)
        raw = encode_binary_tensor(array)
        entries.append(
            {
                "name": name,
                "datatype": oip_datatype(array),
                "shape": list(array.shape),
                "parameters": {"binary_data_size": len(raw)},
            }
        )
        chunks.append(raw)
    doc: dict[str, Any] = {}
    if request_id:
        doc["id"] = request_id
    doc["parameters"] = {**(parameters or {}), "binary_data_output": True}
    doc["inputs"] = entries
    if outputs is not None:
        doc["outputs"] = [{"name": n, "parameters": {"binary_data": True}} for n in outputs]
    header = orjson.dumps(doc, option=orjson.OPT_SERIALIZE_NUMPY)
    headers = {
        "Content-Type": "application/octet-stream",
        INFERENCE_HEADER: str(len(header)),
    }
    return b"".join([header, *chunks]), headers


def decode_response(body: bytes, header_length: str | None) -> dict[str, np.ndarray]:
    """Output name -> array of an inference response (binary outputs are read-only views)."""
    view = memoryview(body)
    json_end = len(view)
    if header_length is not None:
        if not header_length.strip().isdigit() or int(header_length) > len(view):
            raise ValueError(f"bad {INFERENCE_HEADER}: {header_length[:32]!r}")
        json_end = int(header_length)
    try:
        doc = loads_json(view[:json_end])  # Triton writes NaN and Infinity literals
    except ValueError as exc:
        raise ValueError(f"response is not JSON: {exc}") from None
    items = doc.get("outputs") if isinstance(doc, dict) else None
    if not isinstance(items, list):
        raise ValueError("response has no 'outputs' array")
    binary = view[json_end:]
    cursor = 0
    outputs: dict[str, np.ndarray] = {}
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise ValueError("an output has no name")
        name, datatype, shape = item["name"], item.get("datatype"), item.get("shape")
        if not isinstance(shape, list) or not all(
            isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape
        ):
            raise ValueError(f"output '{name}': bad shape {shape!r}")
        if not isinstance(datatype, str):
            raise ValueError(f"output '{name}': unsupported datatype {datatype!r}")
        size = (item.get("parameters") or {}).get("binary_data_size")
        try:
            if size is not None:
                if not isinstance(size, int) or size < 0 or size > len(binary) - cursor:
                    raise ValueError(f"output '{name}': bad binary_data_size {size!r}")
                array = decode_binary_tensor(
                    name, datatype, shape, binary[cursor : cursor + size], role="output"
                )
                cursor += size
            else:
                array = decode_json_tensor(
                    name, datatype, shape, _finite(item.get("data")), role="output"
                )
        except InvalidInput as exc:
            raise ValueError(exc.message) from None
        outputs[name] = array
    return outputs


def error_message(body: bytes) -> str:
    """The ``{"error": ...}`` text of an error response, or the start of the body."""
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body[:200].decode("utf-8", "replace")
    if isinstance(doc, dict) and isinstance(doc.get("error"), str):
        return str(doc["error"])
    return body[:200].decode("utf-8", "replace")


def _finite(data: Any) -> Any:
    """JSON ``null`` in a float output: NaN, as modelport servers before the ``NaN``
    literal wrote it."""
    if isinstance(data, list):
        return [float("nan") if item is None else _finite(item) for item in data]
    return data
