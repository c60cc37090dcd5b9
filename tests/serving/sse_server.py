"""A small OpenAI-compatible server that streams as vLLM does, for streaming tests.

``POST /v1/chat/completions`` and ``/v1/completions`` with ``stream: true`` echo the
prompt's words (the last message's, for a chat), one word per event, as vLLM's
server-sent events: a first chat event with the assistant role and no content, one
event per token, the last one with its ``finish_reason`` (``stop``, or ``length`` at
``max_tokens``), then with ``stream_options.include_usage`` an event with empty
``choices`` and the ``usage`` (prompt tokens: the prompt's words), then ``[DONE]``.

Knobs, per server: ``status`` answers every call with that error status before
streaming; ``break_after`` drops the connection after that many token events;
``delay`` sleeps before each token event; ``report_usage`` False leaves the usage
out. It records each call's body and ``Modelport-Call-Id`` header, and how many token
events it sent in all.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from modelport.serving.types import CALL_ID_HEADER
from tests.conftest import ThreadedServer

MODEL = "tiny-llm"


class Dropped(Exception):
    """Raised in the event generator to drop the connection mid-stream."""


class SseServer(ThreadedServer):
    def __init__(self) -> None:
        self.status = 200
        self.break_after: int | None = None
        self.delay = 0.0
        self.report_usage = True
        self.calls: list[dict[str, Any]] = []
        self.call_ids: list[str | None] = []
        self.sent = 0
        """Token events sent, all calls together."""
        self.closed_early = 0
        """Streams whose client went away before the end."""
        app = Starlette(
            routes=[
                Route("/v1/models", self.models),
                Route("/v1/chat/completions", self.chat, methods=["POST"]),
                Route("/v1/completions", self.completions, methods=["POST"]),
            ]
        )
        super().__init__(app)

    async def models(self, request: Request) -> JSONResponse:
        return JSONResponse({"object": "list", "data": [{"id": MODEL, "object": "model"}]})

    async def chat(self, request: Request) -> Response:
        return await self._answer(request, chat=True)

    async def completions(self, request: Request) -> Response:
        return await self._answer(request, chat=False)

    async def _answer(self, request: Request, *, chat: bool) -> Response:
        body = await request.json()
        self.calls.append(body)
        self.call_ids.append(request.headers.get(CALL_ID_HEADER))
        if self.status != 200:
            error = {"message": f"forced {self.status}", "type": "error", "code": None}
            return JSONResponse({"error": error}, self.status)
        if body.get("model") != MODEL:
            return JSONResponse({"error": {"message": "no such model"}}, 404)
        if body.get("stream") is not True:
            return JSONResponse({"error": {"message": "only streams here"}}, 400)
        prompt = body["messages"][-1]["content"] if chat else body["prompt"]
        events = self._events(body, prompt.split(), chat=chat)
        return StreamingResponse(events, media_type="text/event-stream")

    async def _events(
        self, body: dict[str, Any], words: list[str], *, chat: bool
    ) -> AsyncIterator[str]:
        created = int(time.time())
        kind = "chat.completion.chunk" if chat else "text_completion"
        usage_wanted = self.report_usage and (body.get("stream_options") or {}).get("include_usage")

        def event(choices: list[dict[str, Any]], usage: dict[str, int] | None = None) -> str:
            doc: dict[str, Any] = {
                "id": "cmpl-1",
                "object": kind,
                "created": created,
                "model": MODEL,
                "choices": choices,
            }
            if usage_wanted:
                doc["usage"] = usage
            return f"data: {json.dumps(doc)}\n\n"

        def choice(text: str | None, finish: str | None) -> dict[str, Any]:
            if chat:
                delta = {"role": "assistant", "content": ""} if text is None else {"content": text}
                return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
            return {"index": 0, "text": text or "", "logprobs": None, "finish_reason": finish}

        limit = int(body.get("max_tokens") or 16)
        count = min(len(words), limit)
        finished = False
        try:
            if chat:
                yield event([choice(None, None)])
            for i in range(count):
                if self.break_after is not None and i >= self.break_after:
                    raise Dropped("connection dropped mid-stream")
                if self.delay:
                    await asyncio.sleep(self.delay)
                last = i == count - 1
                finish = None if not last else ("length" if count < len(words) else "stop")
                self.sent += 1
                yield event([choice(words[i] if i == 0 else f" {words[i]}", finish)])
            if usage_wanted:
                usage = {
                    "prompt_tokens": len(body["messages"][-1]["content"].split())
                    if chat
                    else len(body["prompt"].split()),
                    "completion_tokens": count,
                    "total_tokens": 0,
                }
                yield event([], usage)
            yield "data: [DONE]\n\n"
            finished = True
        finally:
            if not finished:
                self.closed_early += 1
