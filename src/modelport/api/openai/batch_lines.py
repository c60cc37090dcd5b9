"""One line of an OpenAI batch, called and encoded (``jobs.batch.LineRunner``): the body
parsed as its route's (``/v1/chat/completions``, ``/v1/completions``,
``/v1/embeddings``), called through ``InferenceService`` at offline priority under the
line's metered call id, and answered as OpenAI's batch output line ``{"id",
"custom_id", "response": {"status_code", "request_id", "body"}, "error"}``. A request
the platform refuses (unknown model, bad parameter, no budget, engine failure) is an
error line with its status and OpenAI's error body; ``stream`` is ignored (a batch
line answers whole). A chat line may name a prompt template as a direct call does
(``api.openai.templates``): rendered per line as the batch's submitter, so a template it
may not read, or a variable missing, fails that line alone with its code."""

from __future__ import annotations

import dataclasses
import hashlib
import time
from typing import Any

import orjson

from modelport.api.openai.embeddings import EmbeddingDecoder, embedding_answer
from modelport.api.openai.encode import chat_completion, text_completion
from modelport.api.openai.errors import error_object
from modelport.api.openai.generation import collect, open_calls
from modelport.api.openai.names import target_of
from modelport.api.openai.requests import (
    Sampling,
    parse_chat,
    parse_completion,
    parse_embedding,
)
from modelport.api.openai.templates import with_template
from modelport.api.problems import status_of
from modelport.errors import ModelportError, NotFound
from modelport.inference.service import InferenceService
from modelport.inference.streaming import GenerateRequest
from modelport.inference.types import Caller, InferenceResult
from modelport.jobs.types import LineOutcome
from modelport.runtime.types import ChatMessage, Priority
from modelport.templates.service import TemplateService
from modelport.tenancy import Principal

GENERATION_TIMEOUT_SECONDS = 600.0


def _line_id(call_id: str) -> str:
    return "batch_req_" + hashlib.sha256(call_id.encode()).hexdigest()[:24]


def _model_not_found(model: str, exc: NotFound) -> ModelportError:
    if exc.code in ("model_not_found", "endpoint_not_found", "version_not_found"):
        return NotFound(
            f"The model '{model}' does not exist or you do not have access to it",
            code="model_not_found",
            param="model",
        )
    return exc


class OpenAILineRunner:
    """``LineRunner`` for OpenAI's batch lines (see the module docstring)."""

    def __init__(
        self,
        inference: InferenceService,
        templates: TemplateService,
        *,
        timeout: float = GENERATION_TIMEOUT_SECONDS,
    ) -> None:
        self.inference = inference
        self.templates = templates
        self.timeout = timeout

    async def run_line(
        self,
        principal: Principal,
        endpoint: str,
        custom_id: str,
        body: dict[str, Any],
        *,
        call_id: str,
        request_id: str,
    ) -> LineOutcome:
        line_id = _line_id(call_id)
        try:
            answer = await self._answer(principal, endpoint, body, call_id, request_id)
        except ModelportError as exc:
            model = body.get("model")
            if isinstance(exc, NotFound) and isinstance(model, str):
                exc = _model_not_found(model, exc)
            status = status_of(exc)
            error = error_object(status, exc.code, exc.message, exc.extra)
            doc: dict[str, Any] = {
                "id": line_id,
                "custom_id": custom_id,
                "response": {
                    "status_code": status,
                    "request_id": request_id,
                    "body": {"error": error},
                },
                "error": {"code": exc.code, "message": exc.message},
            }
            return LineOutcome(False, orjson.dumps(doc, default=str))
        doc = {
            "id": line_id,
            "custom_id": custom_id,
            "response": {"status_code": 200, "request_id": request_id, "body": answer},
            "error": None,
        }
        return LineOutcome(True, orjson.dumps(doc))

    def expired_line(self, custom_id: str, *, call_id: str, request_id: str) -> LineOutcome:
        """OpenAI's line for a request its batch never ran: no response, the error
        ``batch_expired``."""
        doc = {
            "id": _line_id(call_id),
            "custom_id": custom_id,
            "response": None,
            "error": {
                "code": "batch_expired",
                "message": "This request could not be executed before the completion "
                "window expired.",
            },
        }
        return LineOutcome(False, orjson.dumps(doc))

    async def _answer(
        self,
        principal: Principal,
        endpoint: str,
        body: dict[str, Any],
        call_id: str,
        request_id: str,
    ) -> dict[str, Any]:
        if endpoint == "/v1/embeddings":
            parsed = parse_embedding(body)
            decoder = EmbeddingDecoder(parsed)

            async def decode(*specs: Any) -> Any:
                request = await decoder(*specs)
                return dataclasses.replace(request, priority=Priority.OFFLINE)

            caller = Caller(principal, request_id=request_id, call_id=call_id)
            result = await self.inference.infer(caller, target_of(parsed.model), decode)
            assert isinstance(result, InferenceResult)  # no idempotency key: never a replay
            return embedding_answer(parsed, decoder, result)
        if endpoint == "/v1/chat/completions":
            chat = parse_chat(await with_template(self.templates, principal, body))
            return await self._generate(
                principal, chat.sampling, (None,), chat.messages, call_id, request_id
            )
        completion = parse_completion(body)
        return await self._generate(
            principal, completion.sampling, completion.prompts, None, call_id, request_id
        )

    async def _generate(
        self,
        principal: Principal,
        sampling: Sampling,
        prompts: tuple[str | None, ...],
        messages: tuple[ChatMessage, ...] | None,
        call_id: str,
        request_id: str,
    ) -> dict[str, Any]:
        target = target_of(sampling.model)
        deadline = self.inference.clock.monotonic() + self.timeout
        opened = []
        try:
            # One metered call per prompt, each with an id of its own.
            for index, prompt in enumerate(prompts):
                request = GenerateRequest(
                    prompt=prompt or "",
                    max_tokens=sampling.max_tokens,
                    parameters=sampling.parameters,
                    request_id=request_id,
                    messages=messages,
                    n=sampling.n,
                    priority=Priority.OFFLINE,
                    subject=sampling.user,
                )
                one = call_id if len(prompts) == 1 else f"{call_id}:{index}"
                caller = Caller(principal, request_id=request_id, call_id=one)
                calls = await open_calls(
                    self.inference, caller, target, [request], deadline, logprobs=sampling.logprobs
                )
                opened.append(calls)
        except BaseException:
            for calls in opened:
                await calls.aclose()
            raise
        first = opened[0]
        first.streams = [s for calls in opened for s in calls.streams]
        choices = await collect(first)
        created = int(time.time())
        if messages is not None:
            return chat_completion(
                "chatcmpl-" + first.prediction_id, created, sampling.model, choices, first.usage
            )
        return text_completion(
            "cmpl-" + first.prediction_id, created, sampling.model, choices, first.usage
        )
