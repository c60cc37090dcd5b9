"""The Open Inference Protocol (KServe v2) surface.

Re-exported here is its wire layer, pure code with no I/O: ``codec`` (parse and encode),
``types``, ``validate``, ``metadata`` and ``compression`` (``options``, the deadline and
priority headers, is pure too and imported by name). The modules with
I/O are imported by name and are not loaded by importing this package: ``routes`` (the
plain Starlette routes, which call ``modelport.inference``) and ``lane`` (the infer
shortcut the envelope, ``modelport.api.envelope``, routes by).

Typical use of the wire layer::

    request = parse_infer_request(body, headers.get(INFERENCE_HEADER), max_elements=...)
    validate_request(request, manifest.inputs, manifest.outputs, max_input_bytes=...)
    outputs = ...run the model on request.arrays()...
    body, headers = encode_infer_response(
        outputs,
        model_name=name,
        model_version=version,
        request_id=request.id,
        requested=request.outputs,
        binary_data_output=request.binary_data_output,
    )
"""

from modelport.api.v2.codec import (
    BINARY_CONTENT_TYPE,
    DEFAULT_MAX_ELEMENTS,
    JSON_CONTENT_TYPE,
    MAX_RANK,
    encode_infer_response,
    parse_infer_request,
)
from modelport.api.v2.compression import decode_content
from modelport.api.v2.metadata import (
    SERVER_EXTENSIONS,
    model_metadata,
    server_metadata,
    tensor_metadata,
)
from modelport.api.v2.types import (
    INFERENCE_HEADER,
    EncodedResponse,
    InferenceRequest,
    RequestInput,
    RequestOutput,
)
from modelport.api.v2.validate import validate_request

__all__ = [
    "BINARY_CONTENT_TYPE",
    "DEFAULT_MAX_ELEMENTS",
    "INFERENCE_HEADER",
    "JSON_CONTENT_TYPE",
    "MAX_RANK",
    "SERVER_EXTENSIONS",
    "EncodedResponse",
    "InferenceRequest",
    "RequestInput",
    "RequestOutput",
    "decode_content",
    "encode_infer_response",
    "model_metadata",
    "parse_infer_request",
    "server_metadata",
    "tensor_metadata",
    "validate_request",
]
