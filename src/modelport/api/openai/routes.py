"""The OpenAI-compatible routes (``/v1``): parse OpenAI's request, call
``InferenceService`` once, encode OpenAI's answer (see ``docs/openai.md``).

- ``GET /v1/models``, ``GET /v1/models/{model}``: what the key may call;
- ``POST /v1/chat/completions``, ``POST /v1/completions``: ``InferenceService.stream``;
  whole answers collect the chunks, ``stream: true`` answers are SSE;
- ``POST /v1/embeddings``: ``InferenceService.infer`` on an embedding model's tensors.

A ``model`` of ``route:<task>`` is a task alias: the platform picks the model (see
``docs/routing.md``) by the preferences in the body's ``route`` object or the
``Modelport-Route`` header; the answer's ``model`` and its ``Modelport-Routed-Model``
header name the version that served it.

Authentication is the platform's bearer key; every error is OpenAI's error object
(``api.openai.errors``, rendered by ``api.problems``). Errors before the first chunk
are plain HTTP errors (429 with ``Retry-After``, 402, 404 ``model_not_found``, 400
``context_length_exceeded``, ...); after it, a stream ends with an ``error`` event.
A caller that hangs up ends its calls: settled ``cancelled`` for what was delivered.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Mapping
from typing import Any

import anyio.to_thread
import orjson
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from modelport.api import deps
from modelport.api.auth import require_principal_async
from modelport.api.body import read_body
from modelport.api.calls import answered, caller_of, note_call
from modelport.api.disconnect import CLIENT_CLOSED, CallerWatch
from modelport.api.openai.catalog import (
    callable_model,
    callable_models,
    endpoint_object,
    model_object,
)
from modelport.api.openai.embeddings import EmbeddingDecoder, embedding_answer
from modelport.api.openai.encode import ChunkHeader, chat_completion, text_completion
from modelport.api.openai.generation import (
    Calls,
    chat_events,
    collect,
    completion_events,
    open_calls,
)
from modelport.api.openai.names import not_a_text_model, target_of
from modelport.api.openai.requests import (
    Sampling,
    load_json,
    parse_chat,
    parse_completion,
    parse_embedding,
)
from modelport.api.openai.sse import EventStream
from modelport.api.openai.templates import with_template
from modelport.errors import NotFound, Unprocessable
from modelport.inference.service import InferenceService
from modelport.inference.streaming import GenerateRequest
from modelport.inference.task_routes import RouteTarget, is_route, route_target
from modelport.inference.types import (
    Caller,
    EndpointTarget,
    InferenceResult,
    ModelTarget,
    Target,
)
from modelport.runtime.types import ChatMessage
from modelport.serving.backends.base import STREAMING_UNSUPPORTED
from modelport.tenancy import Permission, Principal

ROUTE_HEADER = "modelport-route"
ROUTED_HEADER = "Modelport-Routed-Model"


def json_response(doc: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    """A JSON answer of ``/v1``."""
    return Response(orjson.dumps(doc), status, headers, media_type="application/json")


def _target(request: Request, model: str, doc: Mapping[str, Any]) -> Target | RouteTarget:
    """What ``model`` names: a task alias with its preferences (the ``Modelport-Route``
    header's JSON object, else the body's ``route``), or a model or endpoint."""
    if not is_route(model):
        return target_of(model)
    header = request.headers.get(ROUTE_HEADER)
    return route_target(model, load_json(header.encode()) if header else doc.get("route"))


async def _body(request: Request) -> dict[str, Any]:
    """The JSON body, refused (413) above the inference request limit."""
    limit = deps.settings_service(request).requests.max_inference_request_bytes
    return load_json(await read_body(request, limit))


def _not_found(name: str, exc: NotFound) -> NotFound:
    """Any target that is not there, as OpenAI says it: ``model_not_found``."""
    if exc.code in ("model_not_found", "endpoint_not_found", "version_not_found"):
        return NotFound(
            f"The model '{name}' does not exist or you do not have access to it",
            code="model_not_found",
            param="model",
        )
    return exc


# ---- models
async def list_models(request: Request) -> Response:
    principal = await require_principal_async(request)
    found = await anyio.to_thread.run_sync(callable_models, request, principal)
    return json_response({"object": "list", "data": found})


async def get_model(request: Request) -> Response:
    principal = await require_principal_async(request)
    name = request.path_params["model"]
    target = target_of(name)
    caller = caller_of(request, principal)
    try:
        if isinstance(target, EndpointTarget):
            route = await deps.inference_service(request).route(
                caller, target.name, Permission.MODEL_CALL
            )
            return json_response(endpoint_object(route.endpoint))
        model = await anyio.to_thread.run_sync(
            callable_model, request, principal, target.owner, target.name, target.version
        )
        if model is None:
            raise NotFound(f"no model {name}", code="model_not_found")
        return json_response(model_object(model, name))
    except NotFound as exc:
        raise _not_found(name, exc) from None
    finally:
        note_call(request, caller)


# ---- generation
async def chat_completions(request: Request) -> Response | EventStream:
    principal = await require_principal_async(request)
    doc = await with_template(deps.templates_service(request), principal, await _body(request))
    parsed = parse_chat(doc)
    return await _generate(
        request,
        principal,
        parsed.sampling,
        (None,),
        parsed.messages,
        tools=parsed.tools is not None,
        target=_target(request, parsed.sampling.model, doc),
    )


async def completions(request: Request) -> Response | EventStream:
    principal = await require_principal_async(request)
    doc = await _body(request)
    parsed = parse_completion(doc)
    target = _target(request, parsed.sampling.model, doc)
    return await _generate(request, principal, parsed.sampling, parsed.prompts, None, target=target)


async def _generate(
    request: Request,
    principal: Principal,
    sampling: Sampling,
    prompts: tuple[str | None, ...],
    messages: tuple[ChatMessage, ...] | None,
    *,
    tools: bool = False,
    target: Target | RouteTarget,
) -> Response | EventStream:
    routed = isinstance(target, RouteTarget)
    caller = caller_of(request, principal)
    requests = [
        GenerateRequest(
            prompt=prompt or "",
            max_tokens=sampling.max_tokens,
            parameters=sampling.parameters,
            request_id=caller.request_id,
            messages=messages,
            n=sampling.n,
            priority=sampling.priority,
            subject=sampling.user,
        )
        for prompt in prompts
    ]
    deadline = (
        deps.inference_service(request).clock.monotonic()
        + deps.settings_service(request).llm.generation_timeout_seconds
    )
    chat = messages is not None
    # The body is read: from here a caller that hangs up ends the call.
    caller.watch = CallerWatch(request.receive)
    opening = _open(deps.inference_service(request), caller, target, requests, deadline, sampling)
    if sampling.stream:
        calls = await answered(request, caller, opening)
        if calls is None:
            return Response(status_code=CLIENT_CLOSED)
        header = ChunkHeader(
            ("chatcmpl-" if chat else "cmpl-") + calls.prediction_id,
            int(time.time()),
            _served(calls) if routed else sampling.model,
            sampling.include_usage,
        )
        events = (
            chat_events(calls, header, tools=tools) if chat else completion_events(calls, header)
        )
        return EventStream(events, _routed_header(target, calls))
    completing = _complete(opening, None if routed else sampling.model, chat, tools)
    done = await answered(request, caller, completing)
    if done is None:
        return Response(status_code=CLIENT_CLOSED)
    answer, calls = done
    return json_response(answer, headers=_routed_header(target, calls))


def _served(calls: Calls) -> str:
    """The version that served the call (its first prompt's): a routed call's choice, or
    the fallback a low-priority call was degraded to."""
    return calls.streams[0].served_by


def _routed_header(target: Target | RouteTarget, calls: Calls) -> dict[str, str] | None:
    """``Modelport-Routed-Model`` where the platform chose the version: a task alias, or
    a model whose low-priority call went to its fallback under load."""
    served = _served(calls)
    if isinstance(target, ModelTarget) and served.startswith(f"{target.owner}/{target.name}:"):
        return None
    if isinstance(target, EndpointTarget):
        return None
    return {ROUTED_HEADER: served}


async def _open(
    inference: InferenceService,
    caller: Caller,
    target: Target | RouteTarget,
    requests: list[GenerateRequest],
    deadline: float,
    sampling: Sampling,
) -> Calls:
    try:
        return await open_calls(
            inference, caller, target, requests, deadline, logprobs=sampling.logprobs
        )
    except NotFound as exc:
        raise _not_found(sampling.model, exc) from None
    except Unprocessable as exc:
        # The backend says the version cannot stream; the caller asked for text, from a
        # model that answers tensors (a whole answer is a collected stream).
        if exc.code != STREAMING_UNSUPPORTED or isinstance(target, RouteTarget):
            raise
        raise not_a_text_model(sampling.model, target) from None


async def _complete(
    opening: Awaitable[Calls], model: str | None, chat: bool, tools: bool
) -> tuple[dict[str, Any], Calls]:
    """The whole answer, named ``model`` (None: the version that served it)."""
    calls = await opening
    if model is None:
        model = _served(calls)
    choices = await collect(calls)
    created = int(time.time())
    if chat:
        answer = chat_completion(
            "chatcmpl-" + calls.prediction_id, created, model, choices, calls.usage, tools=tools
        )
    else:
        answer = text_completion(
            "cmpl-" + calls.prediction_id, created, model, choices, calls.usage
        )
    return answer, calls


# ---- embeddings
async def embeddings(request: Request) -> Response:
    principal = await require_principal_async(request)
    doc = await _body(request)
    parsed = parse_embedding(doc)
    target = _target(request, parsed.model, doc)
    caller = caller_of(request, principal)
    decoder = EmbeddingDecoder(parsed)
    caller.watch = CallerWatch(request.receive)
    try:
        result = await answered(
            request, caller, deps.inference_service(request).infer(caller, target, decoder)
        )
    except NotFound as exc:
        raise _not_found(parsed.model, exc) from None
    except ClientDisconnect:
        result = None
    if result is None:
        return Response(status_code=CLIENT_CLOSED)
    assert isinstance(result, InferenceResult)  # no idempotency key: never a replay
    answer = embedding_answer(parsed, decoder, result)
    if not isinstance(target, RouteTarget):
        return json_response(answer)
    served = f"{result.model}:{result.version}"
    return json_response({**answer, "model": served}, headers={ROUTED_HEADER: served})


routes: list[BaseRoute] = [
    Route("/v1/models", list_models, methods=["GET"]),
    Route("/v1/models/{model:path}", get_model, methods=["GET"]),
    Route("/v1/chat/completions", chat_completions, methods=["POST"]),
    Route("/v1/completions", completions, methods=["POST"]),
    Route("/v1/embeddings", embeddings, methods=["POST"]),
]
"""The ``/v1`` routes, mounted by ``api.app`` beside ``/v2``'s."""
