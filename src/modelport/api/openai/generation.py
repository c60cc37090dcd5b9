"""Chat and completion calls over ``InferenceService.stream``: open the calls, then
collect their chunks into one answer or encode them as SSE events.

A completions request with several prompts is one metered call per prompt, opened
together before anything is answered (so every refusal is a plain HTTP error; the
calls opened before a refusal are ended, ``cancelled``), then read one after the
other. Choice ``i`` of prompt ``p`` is choice ``p * n + i`` of the answer.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass

from modelport.api.openai.encode import (
    CHAT_CHUNK,
    TEXT,
    Choice,
    ChunkHeader,
    add_usage,
    assistant_message,
    chat_chunk,
    text_chunk,
    token_logprobs,
)
from modelport.api.openai.errors import error_of
from modelport.api.openai.sse import DONE, event
from modelport.inference.service import InferenceService
from modelport.inference.streaming import CallStream, GenerateRequest
from modelport.inference.task_routes import RouteTarget
from modelport.inference.types import Caller, Target
from modelport.metering.types import Unit


@dataclass
class Calls:
    """The open calls of one request, in prompt order."""

    streams: list[CallStream]
    n: int
    max_tokens: int | None
    """Per choice; None: to the model's context's end (the engine says ``length``)."""
    logprobs: bool

    @property
    def prediction_id(self) -> str:
        return self.streams[0].prediction_id

    @property
    def usage(self) -> dict[Unit, int]:
        total: dict[Unit, int] = {}
        for stream in self.streams:
            total = add_usage(total, stream.usage)
        return total

    async def aclose(self) -> None:
        for stream in self.streams:
            await stream.aclose()


async def open_calls(
    inference: InferenceService,
    caller: Caller,
    target: Target | RouteTarget,
    requests: Sequence[GenerateRequest],
    deadline: float,
    *,
    logprobs: bool,
) -> Calls:
    """One call per request, all admitted and started (see the module docstring)."""
    streams: list[CallStream] = []
    try:
        for request in requests:
            streams.append(await inference.stream(caller, target, request, deadline))
    except BaseException:
        for stream in streams:
            await stream.aclose()
        raise
    first = requests[0]
    return Calls(streams, first.n, first.max_tokens, logprobs)


def _finish(choice: Choice, max_tokens: int | None, tokens: int) -> str:
    """A choice's finish reason where the engine gave none: its stream ended at the
    bound it was held for (``length``), or plainly (``stop``)."""
    return choice.finish_reason or (_ended(max_tokens, tokens))


def _ended(max_tokens: int | None, tokens: int) -> str:
    return "length" if max_tokens is not None and tokens >= max_tokens else "stop"


async def collect(calls: Calls) -> list[Choice]:
    """Every choice, whole. The calls are ended, whatever happens."""
    n = calls.n
    choices = [Choice(i) for i in range(len(calls.streams) * n)]
    tokens = [0] * len(choices)
    try:
        for p, stream in enumerate(calls.streams):
            while (chunk := await stream.receive()) is not None:
                index = p * n + chunk.choice
                choice = choices[index]
                choice.texts.append(chunk.text)
                tokens[index] += chunk.output_tokens
                if calls.logprobs:
                    choice.logprobs += token_logprobs(chunk.text, chunk.logprobs)
                if chunk.finish_reason is not None:
                    choice.finish_reason = chunk.finish_reason
    finally:
        await calls.aclose()
    for index, choice in enumerate(choices):
        choice.finish_reason = _finish(choice, calls.max_tokens, tokens[index])
    return choices


async def chat_events(
    calls: Calls, header: ChunkHeader, *, tools: bool = False
) -> AsyncGenerator[bytes, None]:
    """``chat.completion.chunk`` events: per choice, the assistant role first, then its
    text, then its finish reason; the usage chunk when asked for; ``[DONE]``. An error
    after the first event ends the stream with an ``error`` event instead. With tools,
    each choice's answer is read whole (a JSON object until its end) and sent as one
    delta: its words, or its ``tool_calls``."""
    events = _tool_events(calls, header) if tools else _events(calls, header, chat=True)
    async for data in events:
        yield data


async def _tool_events(calls: Calls, header: ChunkHeader) -> AsyncGenerator[bytes, None]:
    try:
        choices = await collect(calls)
    except Exception as exc:
        yield event({"error": error_of(exc)}, "error")
        return
    for choice in choices:
        done = assistant_message(choice.text, choice.finish_reason or "stop", tools=True)
        message = done["message"]
        yield event(chat_chunk(header, choice.index, {"role": "assistant", "content": ""}))
        if message.get("tool_calls"):
            deltas = [{"index": i, **call} for i, call in enumerate(message["tool_calls"])]
            yield event(chat_chunk(header, choice.index, {"tool_calls": deltas}))
        elif message["content"]:
            yield event(chat_chunk(header, choice.index, {"content": message["content"]}))
        yield event(chat_chunk(header, choice.index, {}, done["finish_reason"]))
    if header.include_usage:
        yield event(header.usage(CHAT_CHUNK, calls.usage))
    yield DONE


async def completion_events(calls: Calls, header: ChunkHeader) -> AsyncGenerator[bytes, None]:
    """``text_completion`` chunk events, as ``chat_events``."""
    async for data in _events(calls, header, chat=False):
        yield data


async def _events(calls: Calls, header: ChunkHeader, *, chat: bool) -> AsyncGenerator[bytes, None]:
    n = calls.n
    count = len(calls.streams) * n
    started = [False] * count
    finished = [False] * count
    tokens = [0] * count
    offsets = [0] * count
    try:
        for p, stream in enumerate(calls.streams):
            while (chunk := await stream.receive()) is not None:
                index = p * n + chunk.choice
                logprobs = token_logprobs(chunk.text, chunk.logprobs) if calls.logprobs else []
                tokens[index] += chunk.output_tokens
                if chat:
                    if not started[index]:
                        started[index] = True
                        yield event(chat_chunk(header, index, {"role": "assistant", "content": ""}))
                    if chunk.text:
                        delta = {"content": chunk.text}
                        yield event(chat_chunk(header, index, delta, None, logprobs))
                    if chunk.finish_reason is not None:
                        finished[index] = True
                        yield event(chat_chunk(header, index, {}, chunk.finish_reason))
                else:
                    started[index] = True
                    finished[index] = chunk.finish_reason is not None
                    yield event(
                        text_chunk(
                            header,
                            index,
                            chunk.text,
                            chunk.finish_reason,
                            logprobs,
                            offsets[index],
                        )
                    )
                    offsets[index] += len(chunk.text)
        for index in range(count):  # choices whose stream ended without saying why
            if finished[index]:
                continue
            reason = _ended(calls.max_tokens, tokens[index])
            if chat:
                if not started[index]:
                    yield event(chat_chunk(header, index, {"role": "assistant", "content": ""}))
                yield event(chat_chunk(header, index, {}, reason))
            else:
                yield event(text_chunk(header, index, "", reason))
        if header.include_usage:
            yield event(header.usage(CHAT_CHUNK if chat else TEXT, calls.usage))
        yield DONE
    except Exception as exc:  # the answer has begun: the error is its last event
        yield event({"error": error_of(exc)}, "error")
    finally:
        await calls.aclose()
