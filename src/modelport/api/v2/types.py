"""Open Inference Protocol (KServe v2) request records: plain data, no I/O.

These are what :func:`modelport.api.v2.codec.parse_infer_request` returns.
They are frozen dataclasses rather than pydantic models because one is built
for every inference call and the codec has already checked every field.
Wire-only parameters of the binary tensor extension (``binary_data_size``,
``binary_data``, ``binary_data_output``) are lifted into fields and removed
from the ``parameters`` dicts, which keep only what the caller meant for the
model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

INFERENCE_HEADER = "Inference-Header-Content-Length"
"""HTTP header giving the length of the JSON part when binary tensor data follows it."""


@dataclass(frozen=True, slots=True)
class RequestInput:
    """One input tensor of a request ($request_input)."""

    name: str
    datatype: str
    """OIP datatype name, e.g. ``FP32`` or ``BYTES``."""
    shape: tuple[int, ...]
    data: np.ndarray
    """The tensor. BYTES is an object array of ``bytes``. Binary inputs are
    read-only views of the request body: copy before writing in place."""
    nbytes: int
    """Payload size: ``data.nbytes``, or for BYTES the sum of element lengths."""
    parameters: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RequestOutput:
    """One requested output ($request_output)."""

    name: str
    binary_data: bool | None = None
    """The ``binary_data`` parameter; None when the client did not say."""
    parameters: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class InferenceRequest:
    """A parsed inference request ($inference_request)."""

    inputs: tuple[RequestInput, ...]
    outputs: tuple[RequestOutput, ...] = ()
    """Requested outputs in order; empty means every output of the model."""
    id: str | None = None
    parameters: dict[str, Any] = field(default_factory=dict)
    binary_data_output: bool = False
    """Request-level default: return outputs as binary unless an output says otherwise."""

    def arrays(self) -> dict[str, np.ndarray]:
        """Input name -> array, the shape a runtime's ``execute`` takes."""
        return {tensor.name: tensor.data for tensor in self.inputs}

    def output_names(self) -> list[str] | None:
        """Names of the requested outputs, or None when all are wanted."""
        return [output.name for output in self.outputs] if self.outputs else None


class EncodedResponse(NamedTuple):
    """A response body and the headers that must go with it (Content-Type and, with
    binary outputs, ``Inference-Header-Content-Length``)."""

    body: bytes
    headers: dict[str, str]
