"""The OpenAI-compatible routes (``/v1``): parse OpenAI's request, call
``InferenceService`` once, encode OpenAI's answer (see ``docs/openai.md``).

- ``GET /v1/models``, ``GET /v1/models/{model}``: what the key may call;
- ``POST /v1/chat/completions``, ``POST /v1/completions``: ``InferenceService.stream``;
  whole answers collect the chunks, ``stream: true`` answers are SSE;
- ``POST /v1/embeddings``: ``InferenceService.infer`` on an embedding model's tensors.

Authentication is the platform's bearer key; every error is OpenAI's error object
(``api.openai.errors``, rendered by ``api.problems``). Errors before the first chunk
are plain HTTP errors (429 with ``Retry-After``, 402, 404 ``model_not_found``, 400
``context_length_exceeded``, ...); after it, a stream ends with an ``error`` event.
A caller that hangs up ends its calls: settled ``cancelled`` for what was delivered.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable
from typing import Any

import anyio.to_thread
import orjson
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from modelport.api.auth import require_principal_async
from modelport.api.calls import answered, caller_of, note_call
from modelport.api.deps import get_services
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
from modelport.errors import NotFound, PayloadTooLarge, Unprocessable
from modelport.inference.service import InferenceService
from modelport.inference.streaming import GenerateRequest
from modelport.inference.types import Caller, EndpointTarget, InferenceResult, Target
from modelport.runtime.types import ChatMessage
from modelport.serving.backends.base import STREAMING_UNSUPPORTED
from modelport.tenancy import Permission, Principal


def json_response(doc: Any, status: int = 200) -> Response:
    """A JSON answer of ``/v1``."""
    return Response(orjson.dumps(doc), status, media_type="application/json")


async def _body(request: Request) -> dict[str, Any]:
    """The JSON body, refused (413) above the inference request limit."""
    limit = get_services(request).settings.requests.max_inference_request_bytes
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(
                f"request body is above the limit of {limit} bytes", code="payload_too_large"
            )
        chunks.append(chunk)
    return load_json(b"".join(chunks))


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
    services = get_services(request)
    caller = caller_of(request, principal)
    try:
        if isinstance(target, EndpointTarget):
            route = await services.inference.route(caller, target.name, Permission.MODEL_CALL)
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
    parsed = parse_chat(await _body(request))
    return await _generate(
        request,
        principal,
        parsed.sampling,
        (None,),
        parsed.messages,
        tools=parsed.tools is not None,
    )


async def completions(request: Request) -> Response | EventStream:
    principal = await require_principal_async(request)
    parsed = parse_completion(await _body(request))
    return await _generate(request, principal, parsed.sampling, parsed.prompts, None)


async def _generate(
    request: Request,
    principal: Principal,
    sampling: Sampling,
    prompts: tuple[str | None, ...],
    messages: tuple[ChatMessage, ...] | None,
    *,
    tools: bool = False,
) -> Response | EventStream:
    services = get_services(request)
    target = target_of(sampling.model)
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
    deadline = time.monotonic() + services.settings.llm.generation_timeout_seconds
    chat = messages is not None
    # The body is read: from here a caller that hangs up ends the call.
    caller.watch = CallerWatch(request.receive)
    opening = _open(services.inference, caller, target, requests, deadline, sampling)
    if sampling.stream:
        calls = await answered(request, caller, opening)
        if calls is None:
            return Response(status_code=CLIENT_CLOSED)
        header = ChunkHeader(
            ("chatcmpl-" if chat else "cmpl-") + calls.prediction_id,
            int(time.time()),
            sampling.model,
            sampling.include_usage,
        )
        events = (
            chat_events(calls, header, tools=tools) if chat else completion_events(calls, header)
        )
        return EventStream(events)
    answer = await answered(request, caller, _complete(opening, sampling.model, chat, tools))
    if answer is None:
        return Response(status_code=CLIENT_CLOSED)
    return json_response(answer)


async def _open(
    inference: InferenceService,
    caller: Caller,
    target: Target,
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
        if exc.code != STREAMING_UNSUPPORTED:
            raise
        raise not_a_text_model(sampling.model, target) from None


async def _complete(
    opening: Awaitable[Calls], model: str, chat: bool, tools: bool
) -> dict[str, Any]:
    calls = await opening
    choices = await collect(calls)
    created = int(time.time())
    if chat:
        return chat_completion(
            "chatcmpl-" + calls.prediction_id, created, model, choices, calls.usage, tools=tools
        )
    return text_completion("cmpl-" + calls.prediction_id, created, model, choices, calls.usage)


# ---- embeddings
async def embeddings(request: Request) -> Response:
    principal = await require_principal_async(request)
    parsed = parse_embedding(await _body(request))
    target = target_of(parsed.model)
    services = get_services(request)
    caller = caller_of(request, principal)
    decoder = EmbeddingDecoder(parsed)
    caller.watch = CallerWatch(request.receive)
    try:
        result = await answered(request, caller, services.inference.infer(caller, target, decoder))
    except NotFound as exc:
        raise _not_found(parsed.model, exc) from None
    except ClientDisconnect:
        result = None
    if result is None:
        return Response(status_code=CLIENT_CLOSED)
    assert isinstance(result, InferenceResult)  # no idempotency key: never a replay
    return json_response(embedding_answer(parsed, decoder, result))


routes: list[BaseRoute] = [
    Route("/v1/models", list_models, methods=["GET"]),
    Route("/v1/models/{model:path}", get_model, methods=["GET"]),
    Route("/v1/chat/completions", chat_completions, methods=["POST"]),
    Route("/v1/completions", completions, methods=["POST"]),
    Route("/v1/embeddings", embeddings, methods=["POST"]),
]
"""The ``/v1`` routes, mounted by ``api.app`` beside ``/v2``'s."""
