"""The Open Inference Protocol REST surface (``/v2``), with the binary tensor data and
model repository extensions.

Model names are ``owner/name``, so every model route carries two path segments:
``/v2/models/acme/fraud-risk/versions/3/infer``. A version segment may also be an
alias. Every route but the health probes needs the bearer key.

These are plain Starlette routes rather than FastAPI ones: ``infer`` is the hot
path, and it parses its body with the codec (orjson, numpy views), not pydantic.
Errors are rendered by ``modelport.api.problems`` as ``{"error": "...", "code": "..."}``:
the protocol's message, and a stable machine code beside it.

Status codes: bad input 400 (naming the input and what was expected), missing
key 401, unknown model or version 404, body too large 413, queue full 429 with
``Retry-After``, version failed to load or not loadable now 503, deadline passed
504. Each inference response carries ``Server-Timing`` with the time queued and
the batch's execution time in milliseconds, and the batch's size in rows; a call of a
version declared deterministic carries ``modelport-cache: hit`` or ``miss``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

import anyio.to_thread
import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from modelport import __version__
from modelport.api import deps
from modelport.api.access import note_tenant, visible_model_refs
from modelport.api.auth import require_principal_async
from modelport.api.body import read_body
from modelport.api.calls import answered, caller_of, note_call
from modelport.api.disconnect import CLIENT_CLOSED, CallerWatch
from modelport.api.hygiene import check_inference_json
from modelport.api.readiness import database_answers
from modelport.api.v2.codec import encode_infer_response, parse_infer_request
from modelport.api.v2.compression import decode_content
from modelport.api.v2.metadata import (
    model_config,
    model_metadata,
    model_statistics,
    server_metadata,
)
from modelport.api.v2.options import (
    TIMEOUT_HEADER,
    model_parameters,
    priority_of,
    timeout_seconds,
)
from modelport.api.v2.types import INFERENCE_HEADER
from modelport.api.v2.types import InferenceRequest as V2Request
from modelport.api.v2.validate import validate_request
from modelport.errors import InvalidInput, NotFound
from modelport.inference.service import InferenceService
from modelport.inference.task_routes import is_route, route_target
from modelport.inference.types import (
    Caller,
    EndpointTarget,
    InferenceRequest,
    InferenceResult,
    ModelTarget,
)
from modelport.manifest import TensorSpec
from modelport.serving.routing.table import Route as Route_
from modelport.tenancy import Permission, Principal

_log = logging.getLogger(__name__)
EXTENSIONS = ("binary_tensor_data", "model_repository", "model_configuration", "statistics")
CACHE_HEADER = "modelport-cache"
ROUTE_HEADER = "modelport-route"
"""A routed call's preferences, as a JSON object (else ``parameters.route``)."""
ROUTED_HEADER = "Modelport-Routed-Model"
"""The version that served a routed call, ``owner/name:version``."""
"""``hit`` or ``miss`` where the response cache was consulted (``inference.cache``)."""


def _json(doc: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(doc), status, media_type="application/json")


def _error(message: str, code: str, status: int) -> Response:
    """An error answered without raising, in the shape ``problems`` renders."""
    return _json({"error": message, "code": code}, status)


async def _authenticate(request: Request) -> Principal:
    return await require_principal_async(request)


def _model(request: Request) -> tuple[str, str, str | None]:
    params = request.path_params
    return params["owner"], params["name"], params.get("version")


async def _json_body(request: Request) -> dict[str, Any]:
    raw = await read_body(request, 1 << 20)
    if not raw.strip():
        return {}
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InvalidInput(f"request body is not valid JSON: {exc}", code="invalid_json") from None
    if not isinstance(doc, dict):
        raise InvalidInput("request body must be a JSON object", code="invalid_request")
    return doc


# ---- health and server metadata
async def live(request: Request) -> Response:
    """The process is up."""
    return _json({"live": True})


async def ready(request: Request) -> Response:
    """The server can serve: its database answers (``api.readiness``)."""
    database = deps.database_service(request)
    if not await asyncio.to_thread(database_answers, database):
        return _error("not ready: the database does not answer", "not_ready", 503)
    return _json({"ready": True})


async def server(request: Request) -> Response:
    await _authenticate(request)
    return _json(server_metadata(__version__, extensions=EXTENSIONS))


# ---- models
async def metadata(request: Request) -> Response:
    principal = await _authenticate(request)
    owner, name, version = _model(request)
    inference = deps.inference_service(request)
    note_tenant(request, owner)
    await inference.require_model(principal, owner, name, Permission.MODEL_READ)
    repository = deps.model_repository_service(request)
    target = await repository.target(owner, name, version)
    versions = [target.version] if version else await repository.versions(owner, name)
    manifest = target.manifest
    return _json(
        model_metadata(target.model, versions, manifest.format, manifest.inputs, manifest.outputs)
    )


async def config(request: Request) -> Response:
    """Triton's model configuration extension; access as for the metadata."""
    principal = await _authenticate(request)
    owner, name, version = _model(request)
    note_tenant(request, owner)
    await deps.inference_service(request).require_model(
        principal, owner, name, Permission.MODEL_READ
    )
    target = await deps.model_repository_service(request).target(owner, name, version)
    return _json(model_config(target.model, target.manifest))


async def statistics(request: Request) -> Response:
    """Triton's statistics extension for one model (or version); access as for the
    metadata. The figures are this process's (see ``observability.metrics``)."""
    principal = await _authenticate(request)
    owner, name, version = _model(request)
    note_tenant(request, owner)
    await deps.inference_service(request).require_model(
        principal, owner, name, Permission.MODEL_READ
    )
    found = await deps.model_repository_service(request).statistics(owner, name, version)
    return _json(model_statistics(found))


async def all_statistics(request: Request) -> Response:
    """Triton's statistics extension for every model the caller may see."""
    principal = await _authenticate(request)
    found = deps.model_repository_service(request).all_statistics()
    refs = sorted({s.model for s in found})
    seen = await anyio.to_thread.run_sync(visible_model_refs, request, principal, refs)
    return _json(model_statistics([s for s in found if s.model in seen]))


async def model_ready(request: Request) -> Response:
    principal = await _authenticate(request)
    owner, name, version = _model(request)
    note_tenant(request, owner)
    await deps.inference_service(request).require_model(
        principal, owner, name, Permission.MODEL_READ
    )
    repository = deps.model_repository_service(request)
    target, is_ready = await repository.ready(owner, name, version)
    if not is_ready:
        status = repository.host.status(target.key)
        state = status.state.value if status else "not loaded"
        return _error(f"{target.key.ref} is not ready: {state}", "model_not_ready", 503)
    return _json({"name": target.model, "version": target.version, "ready": True})


async def infer(request: Request) -> Response:
    """One inference call of a model (``owner/name``) or an endpoint (one segment),
    through ``InferenceService``: this route parses the body (``decode``, called once
    the call is admitted) and encodes the answer. A caller that hangs up once its body
    is read cancels the call (``api.disconnect``): it is metered ``cancelled``.

    The hot path, routed by the envelope's shortcut (``lane``): headers read once."""
    headers = dict(request.scope["headers"])  # names are lower-case bytes in ASGI
    caller = caller_of(request, await require_principal_async(request, _bearer(headers)))
    decoder = _Decoder(
        request,
        headers,
        deps.settings_service(request).requests.max_inference_request_bytes,
        caller,
    )
    params = request.path_params
    routed = "owner" not in params and is_route(params["name"])
    if "owner" in params:
        target = ModelTarget(params["owner"], params["name"], params.get("version"))
        call = deps.inference_service(request).call_model(caller, target, decoder.decode)
    elif routed:
        call = _routed_call(deps.inference_service(request), caller, params["name"], decoder)
    else:
        call = _endpoint_call(deps.inference_service(request), caller, params["name"], decoder)
    result = await answered(request, caller, call)
    if result is None:
        return Response(status_code=CLIENT_CLOSED)
    parsed = decoder.parsed
    encoded = encode_infer_response(
        result.outputs,
        model_name=result.model,
        model_version=result.version,
        request_id=parsed.id,
        requested=parsed.outputs,
        binary_data_output=parsed.binary_data_output,
        declared=decoder.declared,
    )
    encoded.headers["Server-Timing"] = _server_timing(result)
    if result.cache is not None:
        encoded.headers[CACHE_HEADER] = result.cache
    # The platform chose the version: a task alias, or a fallback under load.
    if routed or ("owner" in params and result.model != f"{params['owner']}/{params['name']}"):
        encoded.headers[ROUTED_HEADER] = f"{result.model}:{result.version}"
    return Response(encoded.body, headers=encoded.headers)


async def endpoint_metadata(request: Request) -> Response:
    """An endpoint's metadata as a model's: its schema, its active deployment's version."""
    route = await _endpoint_route(request)
    stable = route.versions[0]
    return _json(
        model_metadata(
            route.endpoint.name,
            [stable.ref],
            stable.manifest.format,
            route.inputs,
            route.outputs,
        )
    )


async def endpoint_ready(request: Request) -> Response:
    """Ready once the endpoint has an active deployment. ``/v2/models/a/ready`` is also
    the metadata of a model ``a/ready`` when there is no endpoint ``a``."""
    try:
        route = await _endpoint_route(request)
    except NotFound as exc:
        if exc.code != "model_not_found":
            raise
        request.scope["path_params"] = {"owner": request.path_params["name"], "name": "ready"}
        try:
            return await metadata(request)
        except NotFound:
            raise exc from None  # neither: the error that names both forms
    return _json({"name": route.endpoint.name, "version": route.versions[0].ref, "ready": True})


async def _endpoint_route(request: Request) -> Route_:
    name = request.path_params["name"]
    caller = caller_of(request, await _authenticate(request))
    try:
        route = await deps.inference_service(request).route(caller, name, Permission.MODEL_READ)
    except NotFound as exc:
        raise _unknown_name(name, exc) from None
    finally:
        note_call(request, caller)
    route.check_active()
    return route


class _Decoder:
    """The ``/v2`` decoding of one infer request, for the service to call once admitted:
    read the body, watch the caller from then on, parse and check it."""

    __slots__ = ("body", "caller", "declared", "headers", "limit", "parsed", "request")

    def __init__(
        self, request: Request, headers: dict[bytes, bytes], limit: int, caller: Caller
    ) -> None:
        self.request = request
        self.headers = headers
        self.limit = limit
        self.caller = caller
        self.parsed: V2Request
        self.declared: Sequence[TensorSpec] = ()
        self.body: bytes | None = None
        """The body as read (a routed call decodes it once per version it tries)."""

    async def read(self) -> bytes:
        """The body, read once (decompressed); from then on a caller that hangs up
        cancels the call (see ``api.disconnect``)."""
        if self.body is not None:
            return self.body
        request, headers, limit = self.request, self.headers, self.limit
        body = await read_body(request, limit, headers.get(b"content-length"))
        self.caller.watch = CallerWatch(request.receive)
        encoding = headers.get(b"content-encoding")
        if encoding is not None:
            settings = deps.settings_service(request)
            unpacked = settings.requests.max_decompressed_request_bytes or limit
            body = decode_content(body, encoding.decode("latin-1"), max_bytes=unpacked)
        self.body = body
        return body

    async def route_preferences(self) -> Any:
        """A routed call's preferences: the ``Modelport-Route`` header's JSON object,
        else the body's ``parameters.route`` (None: none given)."""
        header = self.headers.get(ROUTE_HEADER.encode())
        if header is not None:
            return _json_of(header, ROUTE_HEADER)
        body = await self.read()
        length = _text(self.headers.get(_INFERENCE_HEADER))
        doc = _json_of(body[: int(length)] if length and length.isdigit() else body, "body")
        parameters = doc.get("parameters") if isinstance(doc, dict) else None
        return parameters.get("route") if isinstance(parameters, dict) else None

    async def decode(
        self, inputs: Sequence[TensorSpec], outputs: Sequence[TensorSpec]
    ) -> InferenceRequest:
        request, headers, limit = self.request, self.headers, self.limit
        settings = deps.settings_service(request)
        body = await self.read()
        header_length = _text(headers.get(_INFERENCE_HEADER))
        # Here rather than in the envelope's hygiene: its shortcut leaves it to us, and a
        # compressed body can only be checked once decompressed.
        check_inference_json(body, header_length, settings.requests.max_json_depth)
        parsed = parse_infer_request(
            body, header_length, max_elements=settings.requests.max_tensor_elements
        )
        parameters = parsed.parameters
        # 0 stands for "none given" (a given timeout is above 0): the target's default.
        timeout = timeout_seconds(_text(headers.get(_TIMEOUT_HEADER)), parameters, 0.0)
        priority = priority_of(parameters) if "priority" in parameters else None
        validate_request(parsed, inputs, outputs, max_input_bytes=limit)
        self.parsed = parsed
        self.declared = outputs
        return InferenceRequest(
            parsed.arrays(), model_parameters(parameters), None, timeout or None, priority
        )


async def _endpoint_call(
    inference: InferenceService, caller: Caller, name: str, decoder: _Decoder
) -> InferenceResult:
    """An endpoint called by its name as a ``/v2`` model (no idempotency key here)."""
    try:
        result = await inference.call_endpoint(caller, EndpointTarget(name), decoder.decode)
    except NotFound as exc:
        raise _unknown_name(name, exc) from None
    assert isinstance(result, InferenceResult)
    return result


async def _routed_call(
    inference: InferenceService, caller: Caller, name: str, decoder: _Decoder
) -> InferenceResult:
    """A task alias (``route:<task>``) called as a ``/v2`` model: the platform picks the
    version (``inference.routed``); the answer names it."""
    target = route_target(name, await decoder.route_preferences())
    result = await inference.infer(caller, target, decoder.decode)
    assert isinstance(result, InferenceResult)
    return result


def _json_of(raw: bytes, where: str) -> Any:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise InvalidInput(f"{where} is not valid JSON", code="invalid_route") from None


def _unknown_name(name: str, exc: NotFound) -> NotFound:
    if exc.code != "endpoint_not_found":
        return exc
    return NotFound(
        f"model {name} not found: a model is named owner/name (/v2/models/acme/fraud/infer), "
        f"an endpoint by its name alone (/v2/models/fraud/infer), and there is no "
        f"endpoint {name}",
        code="model_not_found",
    )


_INFERENCE_HEADER = INFERENCE_HEADER.lower().encode()
_TIMEOUT_HEADER = TIMEOUT_HEADER.encode()


def _text(value: bytes | None) -> str | None:
    return None if value is None else value.decode("latin-1")


def _bearer(headers: dict[bytes, bytes]) -> str | None:
    scheme, _, token = headers.get(b"authorization", b"").decode("latin-1").partition(" ")
    if scheme.lower() != "bearer":
        return None
    return token.strip() or None


def _server_timing(result: InferenceResult) -> str:
    timings = result.timings
    # A version's publisher processing shows as its own stages, when it ran.
    processing = "".join(
        f"{stage};dur={timings[stage] * 1000:.3f}, "
        for stage in ("preprocess", "postprocess")
        if stage in timings
    )
    return (
        f"{processing}queue;dur={timings.get('queue', 0.0) * 1000:.3f}, "
        f"compute;dur={timings.get('execute', 0.0) * 1000:.3f}, "
        f'batch;desc="{result.batch_size or 0}"'
    )


# ---- repository extension
async def repository_index(request: Request) -> Response:
    principal = await _authenticate(request)
    body = await _json_body(request)
    rows = deps.model_repository_service(request).index(ready_only=bool(body.get("ready", False)))
    refs = [row["name"] for row in rows]
    seen = await anyio.to_thread.run_sync(visible_model_refs, request, principal, refs)
    return _json([row for row in rows if row["name"] in seen])


async def repository_load(request: Request) -> Response:
    """Load a version (parameter ``version``, default the model's default), optionally
    ``pinned`` so memory pressure never evicts it. Answers when it is ready."""
    principal = await _authenticate(request)
    owner, name, _ = _model(request)
    note_tenant(request, owner)
    await deps.inference_service(request).require_model(
        principal, owner, name, Permission.VERSION_DEPLOY
    )
    parameters = (await _json_body(request)).get("parameters") or {}
    if not isinstance(parameters, dict):
        raise InvalidInput("'parameters' must be an object", code="invalid_request")
    if "config" in parameters or any(str(k).startswith("file:") for k in parameters):
        raise InvalidInput(
            "loading with a model config or files is not supported: publish a version instead",
            code="unsupported_parameter",
        )
    version = parameters.get("version")
    if version is not None and not isinstance(version, str):
        raise InvalidInput("parameter 'version' must be a string", code="invalid_request")
    pinned = parameters.get("pinned", False)
    if not isinstance(pinned, bool):
        raise InvalidInput("parameter 'pinned' must be true or false", code="invalid_request")
    status = await deps.model_repository_service(request).load(owner, name, version, pinned=pinned)
    return _json(
        {
            "name": status.key.model,
            "version": status.key.version,
            "state": status.state.value.upper(),
            "phases": status.phases,
            "warm_up": status.warm_up,
        }
    )


async def repository_unload(request: Request) -> Response:
    """Unload one version (parameter ``version``) or every loaded version of the model."""
    principal = await _authenticate(request)
    owner, name, _ = _model(request)
    note_tenant(request, owner)
    await deps.inference_service(request).require_model(
        principal, owner, name, Permission.VERSION_DEPLOY
    )
    parameters = (await _json_body(request)).get("parameters") or {}
    version = parameters.get("version") if isinstance(parameters, dict) else None
    if version is not None and not isinstance(version, str):
        raise InvalidInput("parameter 'version' must be a string", code="invalid_request")
    keys = await deps.model_repository_service(request).unload(owner, name, version)
    return _json({"unloaded": [{"name": k.model, "version": k.version} for k in keys]})


_MODEL = "/v2/models/{owner}/{name}"
_VERSION = _MODEL + "/versions/{version}"
_REPO = "/v2/repository/models/{owner}/{name}"

routes: list[BaseRoute] = [
    Route("/v2/health/live", live, methods=["GET"]),
    Route("/v2/health/ready", ready, methods=["GET"]),
    Route("/v2", server, methods=["GET"]),
    # An endpoint by its name alone; before the model routes, which would take
    # ``/v2/models/fraud/ready`` for the model ``fraud/ready``.
    Route("/v2/models/stats", all_statistics, methods=["GET"]),
    Route("/v2/models/{name}/infer", infer, methods=["POST"]),
    Route("/v2/models/{name}/ready", endpoint_ready, methods=["GET"]),
    Route("/v2/models/{name}", endpoint_metadata, methods=["GET"]),
    Route(_MODEL, metadata, methods=["GET"]),
    Route(_VERSION, metadata, methods=["GET"]),
    Route(_MODEL + "/config", config, methods=["GET"]),
    Route(_VERSION + "/config", config, methods=["GET"]),
    Route(_MODEL + "/stats", statistics, methods=["GET"]),
    Route(_VERSION + "/stats", statistics, methods=["GET"]),
    Route(_MODEL + "/ready", model_ready, methods=["GET"]),
    Route(_VERSION + "/ready", model_ready, methods=["GET"]),
    Route(_MODEL + "/infer", infer, methods=["POST"]),
    Route(_VERSION + "/infer", infer, methods=["POST"]),
    Route("/v2/repository/index", repository_index, methods=["POST"]),
    Route(_REPO + "/load", repository_load, methods=["POST"]),
    Route(_REPO + "/unload", repository_unload, methods=["POST"]),
]
"""Add to the application with ``app.router.routes.extend(routes)``."""
