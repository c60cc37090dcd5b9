"""OpenAI's answer objects: completions whole (``chat.completion``,
``text_completion``), their streamed chunks (``chat.completion.chunk``, and
``text_completion`` chunks), ``usage``, and logprobs in each shape."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from modelport.inference.tools import parse_answer, tool_calls_json
from modelport.metering.types import Unit

CHAT = "chat.completion"
CHAT_CHUNK = "chat.completion.chunk"
TEXT = "text_completion"


def usage_json(usage: Mapping[Unit, int]) -> dict[str, int]:
    prompt = usage.get(Unit.INPUT_TOKEN, 0)
    completion = usage.get(Unit.OUTPUT_TOKEN, 0)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def add_usage(a: Mapping[Unit, int], b: Mapping[Unit, int]) -> dict[Unit, int]:
    return {unit: a.get(unit, 0) + b.get(unit, 0) for unit in {*a, *b}}


@dataclass
class Choice:
    """One choice as it accumulates from its chunks."""

    index: int
    texts: list[str] = field(default_factory=list)
    logprobs: list[tuple[str, float]] = field(default_factory=list)
    finish_reason: str | None = None

    @property
    def text(self) -> str:
        return "".join(self.texts)


def token_logprobs(text: str, logprobs: Sequence[float] | None) -> list[tuple[str, float]]:
    """A chunk's tokens with their log-probabilities. A chunk of one token is its text;
    the split of a chunk of several is not known here, so those tokens are named ''."""
    if not logprobs:
        return []
    if len(logprobs) == 1:
        return [(text, float(logprobs[0]))]
    return [("", float(lp)) for lp in logprobs]


def chat_logprobs(tokens: Sequence[tuple[str, float]]) -> dict[str, Any]:
    return {
        "content": [
            {"token": t, "logprob": lp, "bytes": list(t.encode("utf-8")), "top_logprobs": []}
            for t, lp in tokens
        ]
    }


def text_logprobs(tokens: Sequence[tuple[str, float]], offset: int = 0) -> dict[str, Any]:
    offsets = []
    for t, _ in tokens:
        offsets.append(offset)
        offset += len(t)
    return {
        "tokens": [t for t, _ in tokens],
        "token_logprobs": [lp for _, lp in tokens],
        "top_logprobs": None,
        "text_offset": offsets,
    }


def chat_completion(
    call_id: str,
    created: int,
    model: str,
    choices: Sequence[Choice],
    usage: Mapping[Unit, int],
    *,
    tools: bool = False,
) -> dict[str, Any]:
    return {
        "id": call_id,
        "object": CHAT,
        "created": created,
        "model": model,
        "choices": [
            {
                "index": c.index,
                **assistant_message(c.text, c.finish_reason or "stop", tools=tools),
                "logprobs": chat_logprobs(c.logprobs) if c.logprobs else None,
            }
            for c in choices
        ],
        "usage": usage_json(usage),
        "system_fingerprint": None,
    }


def assistant_message(text: str, finish_reason: str, *, tools: bool) -> dict[str, Any]:
    """A choice's ``message`` and ``finish_reason``; with tools, the constrained answer
    read back as words or ``tool_calls`` (``finish_reason`` ``tool_calls``)."""
    if not tools:
        return {"message": {"role": "assistant", "content": text}, "finish_reason": finish_reason}
    answer = parse_answer(text)
    message: dict[str, Any] = {"role": "assistant", "content": answer.content}
    if answer.calls:
        message["tool_calls"] = tool_calls_json(answer.calls)
        if finish_reason == "stop":
            finish_reason = "tool_calls"
    return {"message": message, "finish_reason": finish_reason}


def text_completion(
    call_id: str, created: int, model: str, choices: Sequence[Choice], usage: Mapping[Unit, int]
) -> dict[str, Any]:
    return {
        "id": call_id,
        "object": TEXT,
        "created": created,
        "model": model,
        "choices": [
            {
                "index": c.index,
                "text": c.text,
                "logprobs": text_logprobs(c.logprobs) if c.logprobs else None,
                "finish_reason": c.finish_reason or "stop",
            }
            for c in choices
        ],
        "usage": usage_json(usage),
        "system_fingerprint": None,
    }


@dataclass(frozen=True)
class ChunkHeader:
    """What every chunk of one stream repeats."""

    call_id: str
    created: int
    model: str
    include_usage: bool

    def wrap(self, obj: str, choices: list[dict[str, Any]]) -> dict[str, Any]:
        chunk: dict[str, Any] = {
            "id": self.call_id,
            "object": obj,
            "created": self.created,
            "model": self.model,
            "choices": choices,
            "system_fingerprint": None,
        }
        if self.include_usage:
            chunk["usage"] = None  # on every chunk but the last, as OpenAI sends it
        return chunk

    def usage(self, obj: str, usage: Mapping[Unit, int]) -> dict[str, Any]:
        """The last chunk: no choices, the whole call's usage."""
        chunk = self.wrap(obj, [])
        chunk["usage"] = usage_json(usage)
        return chunk


def chat_chunk(
    header: ChunkHeader,
    index: int,
    delta: dict[str, Any],
    finish_reason: str | None = None,
    tokens: Sequence[tuple[str, float]] = (),
) -> dict[str, Any]:
    choice = {
        "index": index,
        "delta": delta,
        "logprobs": chat_logprobs(tokens) if tokens else None,
        "finish_reason": finish_reason,
    }
    return header.wrap(CHAT_CHUNK, [choice])


def text_chunk(
    header: ChunkHeader,
    index: int,
    text: str,
    finish_reason: str | None = None,
    tokens: Sequence[tuple[str, float]] = (),
    offset: int = 0,
) -> dict[str, Any]:
    choice = {
        "index": index,
        "text": text,
        "logprobs": text_logprobs(tokens, offset) if tokens else None,
        "finish_reason": finish_reason,
    }
    return header.wrap(TEXT, [choice])
