"""``GET /v2/openapi.json``: the Open Inference Protocol routes (REST, KServe "v2") as
this server serves them, in the shape of KServe's published data-plane document
(``rest_predict_v2.yaml``: the same schema names) with what modelport adds: models named
``owner/name``, endpoints by name, the binary tensor extension, the repository extension,
Triton's model configuration and statistics extensions, the bearer key and the ``{"error", "code"}`` error body with its stable ``code``.

The document is static (it names no model), so it is served to anyone, like the protocol's
health probes."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from starlette.responses import JSONResponse

from modelport import __version__
from modelport.api.openapi.document import API_KEY, SECURITY_SCHEMES

V2_OPENAPI_URL = "/v2/openapi.json"
_JSON = "application/json"
_ERRORS = {
    400: "The request is malformed, or its tensors do not match the model's inputs.",
    401: "No API key, or one that is unknown, revoked or expired.",
    402: "The caller's budget or balance does not cover the call.",
    403: "The key may not call (or read, or load) this model.",
    404: "No such model, version or endpoint, or the caller may not see it.",
    413: "The request body is over the configured limit.",
    429: "A rate, concurrency or queue limit was reached; see `Retry-After`.",
    503: "The model or backend cannot answer now (loading, unloading, unhealthy).",
    504: "The call's deadline (`Inference-Timeout`) passed.",
}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _ok(schema: str, description: str = "OK") -> dict[str, Any]:
    return {"description": description, "content": {_JSON: {"schema": _ref(schema)}}}


def _errors(*statuses: int) -> dict[str, Any]:
    return {
        str(s): {"description": _ERRORS[s], "content": {_JSON: {"schema": _ref("error_response")}}}
        for s in statuses
    }


def _param(name: str, description: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "path",
        "required": True,
        "schema": {"type": "string"},
        "description": description,
    }


_OWNER = _param("owner", "The model's owner (a tenant)")
_NAME = _param("name", "The model's name")
_VERSION = _param("version", "A version number or an alias")
_ENDPOINT = _param("name", "An endpoint's name")
_SECURED: list[dict[str, list[str]]] = [{API_KEY: []}]


def _metadata(op_id: str, summary: str, params: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "parameters": params,
        "get": {
            "operationId": op_id,
            "summary": summary,
            "tags": ["models"],
            "security": _SECURED,
            "responses": {
                "200": _ok("metadata_model_response"),
                **_errors(400, 401, 403, 404),
            },
        },
    }


def _get(
    op_id: str, summary: str, params: list[dict[str, Any]], schema: str, tag: str
) -> dict[str, Any]:
    return {
        "parameters": params,
        "get": {
            "operationId": op_id,
            "summary": summary,
            "tags": [tag],
            "security": _SECURED,
            "responses": {"200": _ok(schema), **_errors(400, 401, 403, 404)},
        },
    }


def _ready(op_id: str, summary: str, params: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "parameters": params,
        "get": {
            "operationId": op_id,
            "summary": summary,
            "tags": ["health"],
            "security": _SECURED,
            "responses": {
                "200": _ok("model_ready_response"),
                **_errors(400, 401, 403, 404, 503),
            },
        },
    }


def _infer(op_id: str, summary: str, params: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "parameters": params,
        "post": {
            "operationId": op_id,
            "summary": summary,
            "tags": ["inference"],
            "security": _SECURED,
            "parameters": [
                {
                    "name": "Inference-Header-Content-Length",
                    "in": "header",
                    "required": False,
                    "schema": {"type": "integer", "minimum": 0},
                    "description": "Binary tensor extension: the length of the JSON header "
                    "that starts an `application/octet-stream` body; the tensors' bytes "
                    "follow it.",
                },
                {
                    "name": "Inference-Timeout",
                    "in": "header",
                    "required": False,
                    "schema": {"type": "number", "exclusiveMinimum": 0},
                    "description": "Seconds the caller waits (the call's deadline).",
                },
            ],
            "requestBody": {
                "required": True,
                "content": {
                    _JSON: {"schema": _ref("inference_request")},
                    "application/octet-stream": {
                        "schema": {"type": "string", "format": "binary"},
                    },
                },
            },
            "responses": {
                "200": {
                    "description": "The outputs (JSON, or with binary outputs the JSON "
                    "header then the bytes: see `Inference-Header-Content-Length`).",
                    "content": {
                        _JSON: {"schema": _ref("inference_response")},
                        "application/octet-stream": {
                            "schema": {"type": "string", "format": "binary"}
                        },
                    },
                },
                **_errors(400, 401, 402, 403, 404, 413, 429, 503, 504),
            },
        },
    }


def _post(
    op_id: str,
    summary: str,
    params: list[dict[str, Any]],
    request: str,
    response: str,
    statuses: tuple[int, ...],
) -> dict[str, Any]:
    return {
        "parameters": params,
        "post": {
            "operationId": op_id,
            "summary": summary,
            "tags": ["repository"],
            "security": _SECURED,
            "requestBody": {"required": False, "content": {_JSON: {"schema": _ref(request)}}},
            "responses": {"200": _ok(response), **_errors(*statuses)},
        },
    }


_TENSOR_DATA: dict[str, Any] = {
    "type": "array",
    "description": "The tensor's elements, flat in row-major order, or nested by its shape.",
    "items": {
        "anyOf": [
            _ref("tensor_data"),
            {"type": "number"},
            {"type": "string"},
            {"type": "boolean"},
        ]
    },
}
_DATATYPE: dict[str, Any] = {
    "type": "string",
    "enum": [
        "BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64",
        "FP16", "FP32", "FP64", "BYTES",
    ],
}  # fmt: skip
_SHAPE: dict[str, Any] = {"type": "array", "items": {"type": "integer"}}
_PARAMETERS: dict[str, Any] = {"type": "object", "additionalProperties": True}


def _object(required: list[str], **properties: Any) -> dict[str, Any]:
    return {"type": "object", "required": required, "properties": properties}


SCHEMAS: dict[str, Any] = {
    "metadata_server_response": _object(
        ["name", "version", "extensions"],
        name={"type": "string"},
        version={"type": "string"},
        extensions={"type": "array", "items": {"type": "string"}},
    ),
    "metadata_tensor": _object(
        ["name", "datatype", "shape"],
        name={"type": "string"},
        datatype=_DATATYPE,
        shape={**_SHAPE, "description": "-1 for a variable dimension"},
    ),
    "metadata_model_response": _object(
        ["name", "platform"],
        name={"type": "string"},
        versions={"type": "array", "items": {"type": "string"}},
        platform={"type": "string", "description": "The model format (`onnx`, ...)"},
        inputs={"type": "array", "items": _ref("metadata_tensor")},
        outputs={"type": "array", "items": _ref("metadata_tensor")},
    ),
    "parameters": _PARAMETERS,
    "tensor_data": _TENSOR_DATA,
    "request_input": _object(
        ["name", "shape", "datatype"],
        name={"type": "string"},
        shape=_SHAPE,
        datatype=_DATATYPE,
        parameters=_ref("parameters"),
        data=_ref("tensor_data"),
    ),
    "request_output": _object(
        ["name"],
        name={"type": "string"},
        parameters=_ref("parameters"),
    ),
    "inference_request": _object(
        ["inputs"],
        id={"type": "string"},
        parameters=_ref("parameters"),
        inputs={"type": "array", "items": _ref("request_input")},
        outputs={"type": "array", "items": _ref("request_output")},
    ),
    "response_output": _object(
        ["name", "shape", "datatype"],
        name={"type": "string"},
        shape=_SHAPE,
        datatype=_DATATYPE,
        parameters=_ref("parameters"),
        data=_ref("tensor_data"),
    ),
    "inference_response": _object(
        ["model_name", "outputs"],
        model_name={"type": "string"},
        model_version={"type": "string"},
        id={"type": "string"},
        parameters=_ref("parameters"),
        outputs={"type": "array", "items": _ref("response_output")},
    ),
    "error_response": _object(
        ["error"],
        error={"type": "string", "description": "What went wrong, for a human"},
        code={"type": "string", "description": "The stable machine code (as on `/api`)"},
    ),
    "model_config_tensor": _object(
        ["name", "data_type", "dims"],
        name={"type": "string"},
        data_type={"type": "string", "description": "Triton's type: `TYPE_FP32`, ..."},
        dims={**_SHAPE, "description": "Without the batch dimension when max_batch_size > 0"},
    ),
    "model_config_response": _object(
        ["name", "platform", "backend", "max_batch_size", "input", "output"],
        name={"type": "string"},
        platform={"type": "string", "description": "`onnxruntime_onnx` for ONNX"},
        backend={"type": "string"},
        max_batch_size={"type": "integer", "minimum": 0},
        input={"type": "array", "items": _ref("model_config_tensor")},
        output={"type": "array", "items": _ref("model_config_tensor")},
    ),
    "statistic_duration": _object(
        ["count", "ns"],
        count={"type": "integer", "minimum": 0},
        ns={"type": "integer", "minimum": 0},
    ),
    "inference_statistics": _object(
        ["success", "fail", "queue", "compute_input", "compute_infer", "compute_output"],
        success=_ref("statistic_duration"),
        fail=_ref("statistic_duration"),
        queue=_ref("statistic_duration"),
        compute_input=_ref("statistic_duration"),
        compute_infer=_ref("statistic_duration"),
        compute_output=_ref("statistic_duration"),
    ),
    "model_statistics": _object(
        ["name", "version", "last_inference", "inference_count", "execution_count"],
        name={"type": "string"},
        version={"type": "string"},
        last_inference={"type": "integer", "description": "Milliseconds since the epoch"},
        inference_count={"type": "integer", "description": "Rows inferred"},
        execution_count={"type": "integer", "description": "Batches executed"},
        inference_stats=_ref("inference_statistics"),
        batch_stats={"type": "array", "items": {"type": "object"}},
    ),
    "model_statistics_response": _object(
        ["model_stats"], model_stats={"type": "array", "items": _ref("model_statistics")}
    ),
    "server_live_response": _object(["live"], live={"type": "boolean"}),
    "server_ready_response": _object(["ready"], ready={"type": "boolean"}),
    "model_ready_response": _object(
        ["name", "ready"],
        name={"type": "string"},
        version={"type": "string"},
        ready={"type": "boolean"},
    ),
    "repository_index_request": _object(
        [], ready={"type": "boolean", "description": "Only the loaded versions"}
    ),
    "repository_index_response": {
        "type": "array",
        "items": _object(
            ["name"],
            name={"type": "string", "description": "`owner/name`"},
            version={"type": "string"},
            state={"type": "string"},
            reason={"type": "string"},
        ),
    },
    "repository_load_request": _object(
        [],
        parameters=_object(
            [],
            version={"type": "string", "description": "Default: the model's default version"},
            pinned={"type": "boolean", "description": "Never evicted under memory pressure"},
        ),
    ),
    "repository_load_response": _object(
        ["name", "version", "state"],
        name={"type": "string"},
        version={"type": "string"},
        state={"type": "string"},
        phases={"type": "object", "additionalProperties": {"type": "number"}},
        warm_up={},
    ),
    "repository_unload_request": _object(
        [],
        parameters=_object(
            [], version={"type": "string", "description": "Default: every loaded version"}
        ),
    ),
    "repository_unload_response": _object(
        ["unloaded"],
        unloaded={
            "type": "array",
            "items": _object(
                ["name", "version"], name={"type": "string"}, version={"type": "string"}
            ),
        },
    ),
}


def _health(op_id: str, summary: str, schema: str, *statuses: int) -> dict[str, Any]:
    return {
        "get": {
            "operationId": op_id,
            "summary": summary,
            "tags": ["health"],
            "security": [],
            "responses": {"200": _ok(schema), **_errors(*statuses)},
        }
    }


_MODEL = "/v2/models/{owner}/{name}"
_MODEL_VERSION = _MODEL + "/versions/{version}"
_REPO = "/v2/repository/models/{owner}/{name}"


def v2_document() -> dict[str, Any]:
    """The OpenAPI document of the ``/v2`` routes."""
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "modelport Open Inference Protocol",
            "version": __version__,
            "description": "The KServe v2 / Open Inference Protocol REST API "
            "(https://github.com/kserve/open-inference-protocol), with the binary tensor "
            "extension, the model repository extension and Triton's model configuration and "
            "statistics extensions. A model is `owner/name`; a "
            'one-segment name is an endpoint. Errors are `{"error", "code"}`.',
            "license": {"name": "Apache-2.0", "identifier": "Apache-2.0"},
        },
        "tags": [
            {"name": "health", "description": "Server and model health."},
            {"name": "models", "description": "Server and model metadata."},
            {"name": "inference", "description": "Inference calls."},
            {"name": "repository", "description": "The model repository extension."},
            {
                "name": "statistics",
                "description": "Triton's statistics extension: this process's counts.",
            },
        ],
        "paths": {
            "/v2/health/live": _health("serverLive", "Is the server live", "server_live_response"),
            "/v2/health/ready": _health(
                "serverReady", "Is the server ready", "server_ready_response", 503
            ),
            "/v2": {
                "get": {
                    "operationId": "serverMetadata",
                    "summary": "Server metadata",
                    "tags": ["models"],
                    "security": _SECURED,
                    "responses": {
                        "200": _ok("metadata_server_response"),
                        **_errors(401),
                    },
                }
            },
            "/v2/models/{name}": _metadata(
                "endpointMetadata", "An endpoint's metadata", [_ENDPOINT]
            ),
            "/v2/models/{name}/ready": _ready("endpointReady", "Is an endpoint ready", [_ENDPOINT]),
            "/v2/models/{name}/infer": _infer(
                "endpointInfer", "Infer through an endpoint", [_ENDPOINT]
            ),
            _MODEL: _metadata("modelMetadata", "A model's metadata", [_OWNER, _NAME]),
            _MODEL_VERSION: _metadata(
                "modelVersionMetadata", "A version's metadata", [_OWNER, _NAME, _VERSION]
            ),
            "/v2/models/stats": _get(
                "allStatistics",
                "Every visible model's statistics",
                [],
                "model_statistics_response",
                "statistics",
            ),
            _MODEL + "/config": _get(
                "modelConfig",
                "A model's configuration",
                [_OWNER, _NAME],
                "model_config_response",
                "models",
            ),
            _MODEL_VERSION + "/config": _get(
                "modelVersionConfig",
                "A version's configuration",
                [_OWNER, _NAME, _VERSION],
                "model_config_response",
                "models",
            ),
            _MODEL + "/stats": _get(
                "modelStatistics",
                "A model's statistics",
                [_OWNER, _NAME],
                "model_statistics_response",
                "statistics",
            ),
            _MODEL_VERSION + "/stats": _get(
                "modelVersionStatistics",
                "A version's statistics",
                [_OWNER, _NAME, _VERSION],
                "model_statistics_response",
                "statistics",
            ),
            _MODEL + "/ready": _ready("modelReady", "Is a model ready", [_OWNER, _NAME]),
            _MODEL_VERSION + "/ready": _ready(
                "modelVersionReady", "Is a version ready", [_OWNER, _NAME, _VERSION]
            ),
            _MODEL + "/infer": _infer("modelInfer", "Infer with a model", [_OWNER, _NAME]),
            _MODEL_VERSION + "/infer": _infer(
                "modelVersionInfer", "Infer with a version", [_OWNER, _NAME, _VERSION]
            ),
            "/v2/repository/index": _post(
                "repositoryIndex",
                "List the repository's models",
                [],
                "repository_index_request",
                "repository_index_response",
                (400, 401, 413),
            ),
            _REPO + "/load": _post(
                "repositoryLoad",
                "Load a model version",
                [_OWNER, _NAME],
                "repository_load_request",
                "repository_load_response",
                (400, 401, 403, 404, 413, 429, 503),
            ),
            _REPO + "/unload": _post(
                "repositoryUnload",
                "Unload a model's versions",
                [_OWNER, _NAME],
                "repository_unload_request",
                "repository_unload_response",
                (400, 401, 403, 404, 413, 429),
            ),
        },
        "components": {
            "schemas": SCHEMAS,
            "securitySchemes": {API_KEY: SECURITY_SCHEMES[API_KEY]},
        },
    }


def install_v2_document(app: FastAPI) -> None:
    """Serve ``v2_document`` at ``V2_OPENAPI_URL`` (built once)."""
    document = v2_document()

    async def v2_openapi() -> JSONResponse:
        return JSONResponse(document)

    app.add_api_route(V2_OPENAPI_URL, v2_openapi, methods=["GET"], include_in_schema=False)
