"""``inference.GRPCInferenceService``: the Open Inference Protocol over gRPC, a surface
like ``/v2``. Each method authenticates (metadata ``authorization: Bearer <key>``, the
same keys and key cache as HTTP), parses, calls the one service (``InferenceService``
for calls and access, ``ModelRepository`` for the repository extension) and encodes; a
refusal becomes a gRPC status once, in ``_refusals`` (``api.grpc.status``).

A model is named as on ``/v2``: ``owner/name`` (with ``model_version`` a version or
alias, empty for the default) calls a registry version; a name of one segment calls the
endpoint of that name through its active deployment; ``route:<task>`` (no version) is
a task alias on ``ModelInfer``: the platform picks and falls back as on ``/v2``
(``inference.routed``), with the preferences in the ``modelport-route`` metadata or the
string parameter ``route`` (a JSON object); the answer's ``model_name`` and
``model_version`` name the version that served it, which is the one billed.

``ModelStreamInfer`` streams generative models, the way Triton's decoupled models do:
each request on the stream names a model and carries its prompt in the BYTES input
``text_input`` (one element) and its sampling in request parameters (``max_tokens``,
default 16; ``temperature``, ``top_p``, ``top_k``, ``seed``); the server answers with one
response per chunk of text (output ``text_output``, parameter
``triton_final_response`` false), then one response without outputs whose parameters
say ``triton_final_response`` true, ``finish_reason``, ``input_tokens``,
``output_tokens`` and ``prediction_id``. The requests of one stream are answered one
after the other. A refusal or a failure of one request is an in-band response with
``error_message`` (``"<code>: <message>"``), and the stream goes on; only a missing or
wrong key ends the stream itself (UNAUTHENTICATED).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from functools import wraps
from typing import TYPE_CHECKING, Any, TypeVar

import anyio.to_thread
import grpc
from google.protobuf.json_format import ParseDict
from sqlalchemy import text

from modelport import __version__
from modelport.api.grpc import oip_pb2 as pb
from modelport.api.grpc.codec import (
    TEXT_INPUT,
    encode_infer_response,
    parameters_of,
    parse_infer_request,
    text_response,
)
from modelport.api.grpc.status import message_of, status_of, trailers_of
from modelport.api.problems import status_of as http_status_of
from modelport.api.v2.metadata import model_statistics, server_metadata
from modelport.api.v2.options import model_parameters, priority_of, timeout_seconds
from modelport.api.v2.types import InferenceRequest as V2Request
from modelport.api.v2.validate import validate_request
from modelport.errors import Internal, InvalidInput, ModelportError, NotFound, Unavailable
from modelport.ids import unique_id
from modelport.inference.streaming import MAX_TOKENS_LIMIT, GenerateRequest
from modelport.inference.task_routes import INVALID_ROUTE, is_route, route_target
from modelport.inference.types import (
    Caller,
    EndpointTarget,
    InferenceRequest,
    InferenceResult,
    ModelTarget,
    Target,
)
from modelport.manifest import TensorSpec
from modelport.metering.types import Unit
from modelport.runtime.types import Priority
from modelport.tenancy import Permission, Principal
from modelport.tenancy.audit import NewAuditEvent

if TYPE_CHECKING:
    from modelport.app import Services

_log = logging.getLogger(__name__)

SERVICE_NAME = "inference.GRPCInferenceService"
"""The protocol's service name: the path every client calls."""
EXTENSIONS = ("binary_tensor_data", "model_repository", "statistics", "generate_stream")
ROUTE_METADATA = "modelport-route"
"""A routed call's preferences as metadata (a JSON object), as ``/v2``'s header."""
DEFAULT_MAX_TOKENS = 16
"""``max_tokens`` of a streamed request that sets none (OpenAI's completions default)."""
_SAMPLING = {"temperature": float, "top_p": float, "top_k": int, "seed": int}
_MAX_REQUEST_ID = 128

Request = TypeVar("Request")
Response = TypeVar("Response")
Handler = Callable[[Any, Request, grpc.aio.ServicerContext], Awaitable[Response]]


@dataclass(slots=True)
class _Audit:
    """Who a call is, once authenticated, and which tenant it is about: for its audit
    event (see ``_refusals``)."""

    principal: Principal | None = None
    request_id: str = ""
    tenant: str | None = None


_AUDIT: ContextVar[_Audit | None] = ContextVar("grpc_audit", default=None)
_AUDITED = frozenset({"RepositoryModelLoad", "RepositoryModelUnload"})
"""The mutating methods: audited whatever their outcome, as HTTP's mutating requests."""


def _refusals(method: Handler[Request, Response]) -> Handler[Request, Response]:
    """A ``ModelportError`` ends the call with its status (``api.grpc.status``); any other
    exception is logged and answered INTERNAL without its details. As on HTTP, an
    authenticated call of a mutating method, and any call refused as forbidden, leaves an
    audit event (its status the HTTP status of the same outcome)."""
    name = method.__name__

    @wraps(method)
    async def run(self: Any, request: Request, context: grpc.aio.ServicerContext) -> Response:
        audit = _Audit()
        _AUDIT.set(audit)  # this call's own task: no reset needed
        try:
            response = await method(self, request, context)
        except ModelportError as exc:
            if name in _AUDITED or exc.kind == "forbidden":
                await self._audit(name, audit, http_status_of(exc), exc.code)
            await context.abort(status_of(exc), message_of(exc), trailers_of(exc))
        except (asyncio.CancelledError, grpc.aio.AbortError):
            raise
        except Exception:  # one failed call must not take the connection down
            _log.exception("gRPC %s failed", name)
            refused = Internal("internal error")
            if name in _AUDITED:
                await self._audit(name, audit, 500, refused.code)
            await context.abort(status_of(refused), message_of(refused), trailers_of(refused))
        else:
            if name in _AUDITED:
                await self._audit(name, audit, 200, "")
            return response
        raise AssertionError("abort returns by raising")  # pragma: no cover

    return run


class InferenceServicer:
    """The methods of ``inference.GRPCInferenceService`` over one process's services."""

    def __init__(self, services: Services) -> None:
        self.services = services
        self.inference = services.inference
        self.repository = services.model_repository
        self.settings = services.settings

    # ---- authentication, shared by every method but the health probes
    async def _principal(self, context: grpc.aio.ServicerContext) -> Principal:
        token = _bearer(context)
        authenticator = self.services.authenticator
        principal = authenticator.authenticate_cached(token)
        if principal is None:
            principal = await anyio.to_thread.run_sync(authenticator.authenticate, token)
        return principal

    async def _caller(self, context: grpc.aio.ServicerContext) -> Caller:
        caller = Caller(await self._principal(context), _request_id(context))
        audit = _AUDIT.get()
        if audit is not None:
            audit.principal, audit.request_id = caller.principal, caller.request_id
        return caller

    async def _audit(self, method: str, audit: _Audit, status: int, reason: str) -> None:
        """Record the call's audit event (none for an unauthenticated call: nobody to
        attribute it to); a failure to write it is logged, the call's outcome stands."""
        principal = audit.principal
        if principal is None:
            return
        event = NewAuditEvent(
            actor=principal.id,
            actor_tenant=principal.tenant,
            key_id=principal.key_id,
            action=f"grpc.{method}",
            method="GRPC",
            target=f"/{SERVICE_NAME}/{method}",
            tenant=audit.tenant,
            status=status,
            reason=reason,
            request_id=audit.request_id,
        )
        try:
            await anyio.to_thread.run_sync(self.services.tenancy.record, event)
        except Exception:  # the action itself already happened; do not hide its outcome
            _log.exception("could not write the audit event %s", event)

    # ---- health and server metadata
    @_refusals
    async def ServerLive(
        self, request: pb.ServerLiveRequest, context: grpc.aio.ServicerContext
    ) -> pb.ServerLiveResponse:
        return pb.ServerLiveResponse(live=True)

    @_refusals
    async def ServerReady(
        self, request: pb.ServerReadyRequest, context: grpc.aio.ServicerContext
    ) -> pb.ServerReadyResponse:
        """Ready when the database answers, as ``/v2/health/ready``."""
        database = self.services.database

        def check() -> None:
            with database.transaction() as session:
                session.execute(text("SELECT 1"))

        try:
            await asyncio.to_thread(check)
        except Exception:  # any driver error means not ready
            _log.warning("readiness: the database does not answer", exc_info=True)
            return pb.ServerReadyResponse(ready=False)
        return pb.ServerReadyResponse(ready=True)

    @_refusals
    async def ServerMetadata(
        self, request: pb.ServerMetadataRequest, context: grpc.aio.ServicerContext
    ) -> pb.ServerMetadataResponse:
        await self._principal(context)
        response = pb.ServerMetadataResponse()
        ParseDict(server_metadata(__version__, extensions=EXTENSIONS), response)
        return response

    # ---- models
    @_refusals
    async def ModelMetadata(
        self, request: pb.ModelMetadataRequest, context: grpc.aio.ServicerContext
    ) -> pb.ModelMetadataResponse:
        caller = await self._caller(context)
        target = _target(request.name, request.version)
        if isinstance(target, EndpointTarget):
            route = await self._route(caller, target.name)
            stable = route.versions[0]
            return _metadata(
                target.name, [stable.ref], stable.manifest.format, route.inputs, route.outputs
            )
        await self._require(caller, target, Permission.MODEL_READ)
        found = await self.repository.target(target.owner, target.name, target.version)
        versions = (
            [found.version]
            if target.version
            else await self.repository.versions(target.owner, target.name)
        )
        manifest = found.manifest
        return _metadata(found.model, versions, manifest.format, manifest.inputs, manifest.outputs)

    @_refusals
    async def ModelReady(
        self, request: pb.ModelReadyRequest, context: grpc.aio.ServicerContext
    ) -> pb.ModelReadyResponse:
        """An endpoint is ready once it has an active deployment; a version once it is
        loaded on this process's host (as ``/v2``'s readiness)."""
        caller = await self._caller(context)
        target = _target(request.name, request.version)
        if isinstance(target, EndpointTarget):
            try:
                await self._route(caller, target.name)
            except Unavailable as exc:
                if exc.code != "no_active_deployment":
                    raise
                return pb.ModelReadyResponse(ready=False)
            return pb.ModelReadyResponse(ready=True)
        await self._require(caller, target, Permission.MODEL_READ)
        _, ready = await self.repository.ready(target.owner, target.name, target.version)
        return pb.ModelReadyResponse(ready=ready)

    @_refusals
    async def ModelInfer(
        self, request: pb.ModelInferRequest, context: grpc.aio.ServicerContext
    ) -> pb.ModelInferResponse:
        caller = await self._caller(context)
        decoder = _Decoder(
            request, self.settings.requests.max_tensor_elements, context.time_remaining()
        )
        if is_route(request.model_name):
            if request.model_version:
                raise InvalidInput(
                    f"{request.model_name} is called without a version: the platform picks one",
                    code="invalid_route",
                )
            routed = route_target(request.model_name, _route_preferences(request, context))
            answered = await self.inference.infer(caller, routed, decoder.decode)
            assert isinstance(answered, InferenceResult)
            return self._infer_response(answered, decoder)
        target = _target(request.model_name, request.model_version)
        if isinstance(target, ModelTarget):
            result = await self.inference.call_model(caller, target, decoder.decode)
        else:
            try:
                answered = await self.inference.call_endpoint(caller, target, decoder.decode)
            except NotFound as exc:
                raise _unknown_name(target.name, exc) from None
            assert isinstance(answered, InferenceResult)  # no idempotency key: no replay
            result = answered
        return self._infer_response(result, decoder)

    @staticmethod
    def _infer_response(result: InferenceResult, decoder: _Decoder) -> pb.ModelInferResponse:
        """The answer, naming the version that served it (a routed call's choice)."""
        parsed = decoder.parsed
        return encode_infer_response(
            result.outputs,
            model_name=result.model,
            model_version=result.version,
            request_id=parsed.id,
            requested=parsed.outputs,
            declared=decoder.declared,
        )

    async def ModelStreamInfer(
        self,
        requests: AsyncIterator[pb.ModelInferRequest],
        context: grpc.aio.ServicerContext,
    ) -> AsyncIterator[pb.ModelStreamInferResponse]:
        """Generative calls, one after the other (see the module docstring)."""
        try:
            principal = await self._principal(context)
        except ModelportError as exc:
            await context.abort(status_of(exc), message_of(exc), trailers_of(exc))
            return
        except Exception:  # answered INTERNAL without its details, as the other methods
            _log.exception("gRPC ModelStreamInfer failed to authenticate")
            refused = Internal("internal error")
            await context.abort(status_of(refused), message_of(refused), trailers_of(refused))
            return
        async for request in requests:
            try:
                async for response in self._generate(principal, request, context):
                    yield pb.ModelStreamInferResponse(infer_response=response)
            except ModelportError as exc:
                yield pb.ModelStreamInferResponse(error_message=message_of(exc))
            except Exception:  # one failed request must not end the stream
                _log.exception("gRPC stream request failed")
                yield pb.ModelStreamInferResponse(error_message="internal_error: internal error")

    async def _generate(
        self, principal: Principal, request: pb.ModelInferRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.ModelInferResponse]:
        target = _target(request.model_name, request.model_version)
        generate = _generate_request(request, _request_id(context))
        remaining = context.time_remaining()
        seconds = self.settings.llm.generation_timeout_seconds
        if remaining is not None:
            seconds = min(seconds, remaining)
        caller = Caller(principal, generate.request_id)
        try:
            stream = await self.inference.stream(
                caller, target, generate, self.inference.clock.monotonic() + seconds
            )
        except NotFound as exc:
            raise _unknown_name(request.model_name, exc) from None
        model = request.model_name
        finish: str | None = None
        async with stream:
            version = ""
            async for chunk in stream:
                if chunk.version is not None:
                    version = chunk.version.version
                if chunk.finish_reason is not None:
                    finish = chunk.finish_reason
                if not chunk.text:
                    continue
                yield text_response(
                    chunk.text,
                    model_name=model,
                    model_version=version,
                    request_id=request.id,
                    parameters={"triton_final_response": False},
                )
            usage = stream.usage
        yield text_response(
            "",
            model_name=model,
            model_version=version,
            request_id=request.id,
            parameters={
                "triton_final_response": True,
                "finish_reason": finish or "stop",
                "input_tokens": usage.get(Unit.INPUT_TOKEN, 0),
                "output_tokens": usage.get(Unit.OUTPUT_TOKEN, 0),
                "prediction_id": stream.prediction_id,
            },
        )

    # ---- statistics extension
    @_refusals
    async def ModelStatistics(
        self, request: pb.ModelStatisticsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ModelStatisticsResponse:
        """This process's figures for one model (or version), or for every model the
        caller may see when no name is given."""
        caller = await self._caller(context)
        if request.name:
            target = _target(request.name, request.version)
            if not isinstance(target, ModelTarget):
                raise NotFound(
                    f"statistics are kept per model version, not for endpoint {target.name}",
                    code="model_not_found",
                )
            await self._require(caller, target, Permission.MODEL_READ)
            found = await self.repository.statistics(
                target.owner, target.name, target.version or None
            )
        else:
            every = self.repository.all_statistics()
            seen = await self._visible(caller, sorted({s.model for s in every}))
            found = [s for s in every if s.model in seen]
        response = pb.ModelStatisticsResponse()
        ParseDict(model_statistics(found), response)
        return response

    # ---- repository extension
    @_refusals
    async def RepositoryIndex(
        self, request: pb.RepositoryIndexRequest, context: grpc.aio.ServicerContext
    ) -> pb.RepositoryIndexResponse:
        caller = await self._caller(context)
        rows = self.repository.index(ready_only=request.ready)
        seen = await self._visible(caller, sorted({row["name"] for row in rows}))
        response = pb.RepositoryIndexResponse()
        ParseDict({"models": [row for row in rows if row["name"] in seen]}, response)
        return response

    @_refusals
    async def RepositoryModelLoad(
        self, request: pb.RepositoryModelLoadRequest, context: grpc.aio.ServicerContext
    ) -> pb.RepositoryModelLoadResponse:
        """Load a version (parameter ``version``, default the model's default), optionally
        ``pinned``; answers once it is ready. Needs ``version.deploy``, as on HTTP."""
        caller = await self._caller(context)
        target = _model_target(request.model_name)
        parameters = parameters_of(request.parameters)
        if "config" in parameters or any(str(k).startswith("file:") for k in parameters):
            raise InvalidInput(
                "loading with a model config or files is not supported: publish a version instead",
                code="unsupported_parameter",
            )
        version = _text_parameter(parameters, "version")
        pinned = parameters.get("pinned", False)
        if not isinstance(pinned, bool):
            raise InvalidInput("parameter 'pinned' must be true or false", code="invalid_request")
        await self._require(caller, target, Permission.VERSION_DEPLOY)
        await self.repository.load(target.owner, target.name, version, pinned=pinned)
        return pb.RepositoryModelLoadResponse()

    @_refusals
    async def RepositoryModelUnload(
        self, request: pb.RepositoryModelUnloadRequest, context: grpc.aio.ServicerContext
    ) -> pb.RepositoryModelUnloadResponse:
        """Unload one version (parameter ``version``) or every loaded version of the model."""
        caller = await self._caller(context)
        target = _model_target(request.model_name)
        version = _text_parameter(parameters_of(request.parameters), "version")
        await self._require(caller, target, Permission.VERSION_DEPLOY)
        await self.repository.unload(target.owner, target.name, version)
        return pb.RepositoryModelUnloadResponse()

    # ---- access, through the inference service as every surface asks it
    async def _require(self, caller: Caller, target: ModelTarget, permission: Permission) -> None:
        audit = _AUDIT.get()
        if audit is not None:
            audit.tenant = target.owner
        await self.inference.require_model(caller.principal, target.owner, target.name, permission)

    async def _route(self, caller: Caller, name: str) -> Any:
        try:
            route = await self.inference.route(caller, name, Permission.MODEL_READ)
        except NotFound as exc:
            raise _unknown_name(name, exc) from None
        route.check_active()
        return route

    async def _visible(self, caller: Caller, refs: Sequence[str]) -> set[str]:
        """Which ``owner/name`` refs the caller may see."""
        seen: set[str] = set()
        for ref in refs:
            owner, _, name = ref.partition("/")
            try:
                await self.inference.require_model(
                    caller.principal, owner, name, Permission.MODEL_READ
                )
            except ModelportError:
                continue
            seen.add(ref)
        return seen


class _Decoder:
    """The gRPC decoding of one infer request, for the service to call once it knows the
    target's declared tensors."""

    __slots__ = ("declared", "limit", "parsed", "remaining", "request")

    def __init__(self, request: pb.ModelInferRequest, limit: int, remaining: float | None) -> None:
        self.request = request
        self.limit = limit
        self.remaining = remaining
        self.parsed: V2Request
        self.declared: Sequence[TensorSpec] = ()

    async def decode(
        self, inputs: Sequence[TensorSpec], outputs: Sequence[TensorSpec]
    ) -> InferenceRequest:
        parsed = parse_infer_request(self.request, max_elements=self.limit)
        parameters = parsed.parameters
        # The call's deadline: the gRPC deadline, Triton's ``timeout`` parameter
        # (microseconds), whichever is nearer; neither: the target's default.
        timeout = timeout_seconds(None, parameters, 0.0) or None
        if self.remaining is not None:
            timeout = self.remaining if timeout is None else min(timeout, self.remaining)
        priority = priority_of(parameters) if "priority" in parameters else None
        validate_request(parsed, inputs, outputs)
        self.parsed = parsed
        self.declared = outputs
        return InferenceRequest(
            parsed.arrays(), model_parameters(parameters), None, timeout, priority
        )


def _generate_request(request: pb.ModelInferRequest, request_id: str) -> GenerateRequest:
    """A streamed request's prompt and sampling (see the module docstring)."""
    prompt = _prompt(request)
    parameters = parameters_of(request.parameters)
    max_tokens = parameters.pop("max_tokens", DEFAULT_MAX_TOKENS)
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int):
        raise InvalidInput("parameter 'max_tokens' must be an integer", code="invalid_max_tokens")
    if not 1 <= max_tokens <= MAX_TOKENS_LIMIT:
        raise InvalidInput(
            f"parameter 'max_tokens' must be between 1 and {MAX_TOKENS_LIMIT}",
            code="invalid_max_tokens",
        )
    priority = priority_of(parameters) if "priority" in parameters else Priority.INTERACTIVE
    sampling: dict[str, Any] = {}
    for key, value in parameters.items():
        if key in ("priority", "timeout") or key.startswith("triton_"):
            continue
        kind = _SAMPLING.get(key)
        if kind is None:
            raise InvalidInput(
                f"parameter '{key}' is not understood: {', '.join(['max_tokens', *_SAMPLING])}",
                code="unsupported_parameter",
            )
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InvalidInput(f"parameter '{key}' must be a number", code="invalid_request")
        sampling[key] = kind(value)
    return GenerateRequest(
        prompt=prompt,
        max_tokens=max_tokens,
        parameters=sampling,
        request_id=request.id or request_id,
        priority=priority,
    )


def _prompt(request: pb.ModelInferRequest) -> str:
    names = [tensor.name for tensor in request.inputs]
    if names != [TEXT_INPUT]:
        raise InvalidInput(
            f"a streamed request carries one input, '{TEXT_INPUT}' (BYTES), not {names}",
            code="invalid_input",
        )
    parsed = parse_infer_request(request, max_elements=1)
    (tensor,) = parsed.inputs
    if tensor.datatype != "BYTES" or tensor.data.size != 1:
        raise InvalidInput(
            f"input '{TEXT_INPUT}' must be BYTES with one element", code="invalid_input"
        )
    item = tensor.data.reshape(-1)[0]
    try:
        return item.decode("utf-8") if isinstance(item, bytes) else str(item)
    except UnicodeDecodeError:
        raise InvalidInput(f"input '{TEXT_INPUT}' is not UTF-8", code="invalid_input") from None


def _target(name: str, version: str) -> Target:
    """``owner/name`` (and a version or alias) or an endpoint's one-segment name."""
    if not name:
        raise InvalidInput("a model name is required", code="invalid_request")
    owner, slash, rest = name.partition("/")
    if not slash:
        if version:
            raise InvalidInput(
                f"endpoint {name} is called without a version: its deployment chooses one",
                code="invalid_request",
            )
        return EndpointTarget(name)
    if not owner or not rest or "/" in rest:
        raise NotFound(
            f"model {name} not found: models are named owner/name", code="model_not_found"
        )
    return ModelTarget(owner, rest, version or None)


def _route_preferences(request: pb.ModelInferRequest, context: grpc.aio.ServicerContext) -> Any:
    """A routed call's preferences, as ``/v2`` takes them: the ``modelport-route``
    metadata's JSON object, else the request parameter ``route`` (a JSON object as a
    string: gRPC parameters hold no objects); None when neither is given."""
    raw = _metadata_value(context, ROUTE_METADATA)
    if raw is None:
        given = parameters_of(request.parameters).get("route")
        if given is None:
            return None
        if not isinstance(given, str):
            raise InvalidInput(
                "parameter 'route' must be a JSON object in a string", code=INVALID_ROUTE
            )
        raw = given
    try:
        return json.loads(raw)
    except ValueError:
        raise InvalidInput("the route preferences are not valid JSON", code=INVALID_ROUTE) from None


def _model_target(name: str) -> ModelTarget:
    target = _target(name, "")
    if not isinstance(target, ModelTarget):
        raise InvalidInput(
            f"{name}: the repository loads registry versions (owner/name), not endpoints",
            code="invalid_request",
        )
    return target


def _unknown_name(name: str, exc: NotFound) -> NotFound:
    if exc.code != "endpoint_not_found":
        return exc
    return NotFound(
        f"model {name} not found: a model is named owner/name, an endpoint by its name "
        f"alone, and there is no endpoint {name}",
        code="model_not_found",
    )


def _text_parameter(parameters: dict[str, Any], key: str) -> str | None:
    value = parameters.get(key)
    if value is not None and not isinstance(value, str):
        raise InvalidInput(f"parameter '{key}' must be a string", code="invalid_request")
    return value or None


def _metadata(
    name: str,
    versions: Sequence[str],
    platform: str,
    inputs: Sequence[TensorSpec],
    outputs: Sequence[TensorSpec],
) -> pb.ModelMetadataResponse:
    response = pb.ModelMetadataResponse(name=name, versions=versions, platform=platform)
    for spec in inputs:
        response.inputs.add(name=spec.name, datatype=spec.datatype, shape=spec.shape)
    for spec in outputs:
        response.outputs.add(name=spec.name, datatype=spec.datatype, shape=spec.shape)
    return response


def _metadata_value(context: grpc.aio.ServicerContext, key: str) -> str | None:
    for item_key, value in context.invocation_metadata() or ():
        if item_key == key:
            return value if isinstance(value, str) else value.decode("latin-1")
    return None


def _bearer(context: grpc.aio.ServicerContext) -> str | None:
    scheme, _, token = (_metadata_value(context, "authorization") or "").partition(" ")
    if scheme.lower() != "bearer":
        return None
    return token.strip() or None


def _request_id(context: grpc.aio.ServicerContext) -> str:
    given = _metadata_value(context, "x-request-id")
    if given and len(given) <= _MAX_REQUEST_ID and given.isprintable():
        return given
    return unique_id()
