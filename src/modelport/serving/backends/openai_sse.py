"""An OpenAI-compatible server's streamed answer, as ``StreamChunk``s.

The request (``stream_body``) asks for ``stream: true`` with
``stream_options: {include_usage: true}``, as vLLM, TGI, llama.cpp's server and
OpenAI accept. The answer is server-sent events: ``data: {json}`` lines, one
``chat.completion.chunk`` (``choices[].delta.content``) or ``text_completion``
(``choices[].text``) per event, a choice's last one with its ``finish_reason``, then
(with ``include_usage``) one with empty ``choices`` and the ``usage``, then
``data: [DONE]``. An event with an ``error`` ends the stream as the backend's failure.

Tokens: a server says nothing per event, so each event's text counts as one output
token (what servers send: one token per event) as it passes, and what a consumer who
leaves early is charged for. A choice's ``finish_reason`` is held back until the
server's stream ends, so that the usage it reports last can ride on the stream's last
chunk: its ``prompt_tokens`` as the input tokens, and the difference between its
``completion_tokens`` and the tokens counted so far as an output correction (which
may be negative). A server that never reports usage leaves the per-event count and no
input tokens (the streamed call then estimates them, see ``inference.streaming``).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

from modelport.errors import Unavailable
from modelport.runtime.types import ChatMessage
from modelport.serving.types import StreamChunk, StreamRequest

STREAMED_TASKS = frozenset({"chat", "completions"})
PASSED_PARAMETERS = (
    "temperature",
    "top_p",
    "stop",
    "seed",
    "presence_penalty",
    "frequency_penalty",
    "logit_bias",
)


def stream_body(request: StreamRequest, task: str, model: str) -> dict[str, Any]:
    """The JSON body of a streamed ``chat`` or ``completions`` request."""
    body: dict[str, Any] = {
        "model": model,
        "stream": True,
        "stream_options": {"include_usage": True},
        "n": request.n,
    }
    if not request.to_context_end:  # else the server's own default: to the context's end
        body["max_tokens"] = request.max_tokens
    parameters = request.parameters
    body |= {k: parameters[k] for k in PASSED_PARAMETERS if k in parameters}
    response_format = parameters.get("response_format")
    if isinstance(response_format, dict):
        body["response_format"] = openai_response_format(response_format)
    if task == "chat":
        messages = request.messages
        if messages is None:
            body["messages"] = [{"role": "user", "content": request.prompt}]
        else:
            body["messages"] = [_message(m) for m in messages]
    else:
        body["prompt"] = request.prompt
    return body


def openai_response_format(parsed: dict[str, Any]) -> dict[str, Any]:
    """The engine's ``response_format`` in OpenAI's request form again."""
    if parsed.get("type") == "json_schema":
        schema = parsed.get("schema") or {}
        return {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}}
    return {"type": "json_object"}


def _message(message: ChatMessage) -> dict[str, Any]:
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        out["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in message.tool_calls
        ]
        out["content"] = message.content or None
    if message.tool_call_id is not None:
        out["tool_call_id"] = message.tool_call_id
    return out


class SseEvents:
    """The JSON documents of an event stream's ``data:`` lines, until ``[DONE]``."""

    def __init__(self, lines: AsyncIterator[str], backend: str) -> None:
        self._lines = lines
        self._backend = backend
        self._done = False

    def __aiter__(self) -> SseEvents:
        return self

    async def __anext__(self) -> dict[str, Any]:
        while not self._done:
            line = await anext(self._lines)
            if not line.startswith("data:"):
                continue  # blank separators, comments, ``event:`` and ``id:`` fields
            data = line[5:].strip()
            if data == "[DONE]":
                self._done = True
                break
            try:
                doc = json.loads(data)
            except ValueError:
                raise Unavailable(
                    f"{self._backend} sent an event that is not JSON", code="backend_bad_response"
                ) from None
            if not isinstance(doc, dict):
                raise Unavailable(
                    f"{self._backend} sent an event that is not an object",
                    code="backend_bad_response",
                )
            return doc
        raise StopAsyncIteration


class StreamReader:
    """Turns one stream's events into chunks (see the module docstring)."""

    def __init__(self, backend: str, *, chat: bool) -> None:
        self.backend = backend
        self.chat = chat
        self.index = 0
        self.counted = 0
        """Output tokens counted so far (one per event with text)."""
        self.finished: dict[int, str] = {}
        """Finish reasons by choice, held back until the end."""
        self.usage: dict[str, Any] | None = None

    def _chunk(self, text: str, tokens: int, choice: int, finish: str | None = None) -> StreamChunk:
        chunk = StreamChunk(self.index, text, tokens, self.backend, 0, finish, choice)
        self.index += 1
        return chunk

    def read(self, doc: dict[str, Any]) -> Iterator[StreamChunk]:
        """The chunks of one event (at least one for the stream's first event, which
        says the server accepted the request)."""
        error = doc.get("error")
        if error is not None:
            message = error.get("message") if isinstance(error, dict) else str(error)
            raise Unavailable(
                f"{self.backend} failed the stream: {message}",
                code="backend_stream_error",
                backend=self.backend,
            )
        usage = doc.get("usage")
        if isinstance(usage, dict):
            self.usage = usage
        first = self.index == 0
        for choice in doc.get("choices") or ():
            if not isinstance(choice, dict):
                raise Unavailable(
                    f"{self.backend} sent a malformed choice", code="backend_bad_response"
                )
            number = choice.get("index", 0)
            source = choice.get("delta") if self.chat else choice
            text = source.get("content" if self.chat else "text") if source else None
            text = text if isinstance(text, str) else ""
            tokens = 1 if text else 0
            self.counted += tokens
            finish = choice.get("finish_reason")
            if isinstance(finish, str):
                self.finished[number] = finish
            yield self._chunk(text, tokens, number if isinstance(number, int) else 0)
        if first and self.index == 0:
            yield self._chunk("", 0, 0)  # accepted, nothing generated yet

    def end(self) -> Iterator[StreamChunk]:
        """The held-back finish of each choice, the last one carrying the usage."""
        if not self.finished:
            raise Unavailable(
                f"{self.backend} ended the stream without finishing it",
                code="backend_bad_response",
            )
        choices = sorted(self.finished)
        for number in choices[:-1]:
            yield self._chunk("", 0, number, self.finished[number])
        last = self._chunk("", 0, choices[-1], self.finished[choices[-1]])
        usage = self.usage or {}
        prompt = usage.get("prompt_tokens")
        completion = usage.get("completion_tokens")
        input_tokens = prompt if isinstance(prompt, int) and prompt > 0 else 0
        correction = completion - self.counted if isinstance(completion, int) else 0
        yield StreamChunk(
            last.index,
            "",
            correction,
            self.backend,
            input_tokens,
            last.finish_reason,
            last.choice,
        )
