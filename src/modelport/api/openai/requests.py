"""Parsing of OpenAI's request bodies into plain records.

Fields OpenAI defines and the platform serves are checked (a bad value is 400 with
``param`` naming the field); fields it does not know are ignored, as OpenAI does;
fields OpenAI defines that the platform cannot honour (``functions``, ``echo``,
``best_of``, ``suffix``, token-id prompts) are refused with ``unsupported_parameter``
rather than silently dropped, unless they hold their neutral value; an engine that
cannot honour one it was given (constrained decoding on the ``transformers`` engine)
refuses it the same way. ``null`` is the same as an absent field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import orjson

from modelport.errors import InvalidInput
from modelport.inference.streaming import MAX_CHOICES, MAX_TOKENS_LIMIT
from modelport.inference.tools import ToolPlan, parse_tools
from modelport.runtime.types import ChatMessage, Priority, ToolCall

DEFAULT_COMPLETION_MAX_TOKENS = 16
"""OpenAI's default ``max_tokens`` for ``/v1/completions``."""
MAX_STOP = 4
MAX_PROMPTS = 16
"""Prompts one ``/v1/completions`` request may batch (each is its own metered call)."""
MAX_EMBEDDING_INPUTS = 2048
MAX_TOP_LOGPROBS = 20
MAX_COMPLETION_LOGPROBS = 5
ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})


@dataclass(frozen=True)
class Sampling:
    """What chat and completions requests share."""

    model: str
    max_tokens: int | None
    """None (a chat that sets none): to the end of the model's context, as OpenAI does;
    the call is held for the model's context length."""
    n: int = 1
    stream: bool = False
    include_usage: bool = False
    parameters: Mapping[str, Any] = field(default_factory=dict)
    """For the engine: ``temperature``, ``top_p``, ``top_k``, ``stop``, ``seed``,
    ``logprobs`` (True), ``top_logprobs``."""
    logprobs: bool = False
    priority: Priority = Priority.INTERACTIVE
    user: str | None = None
    """The end user the call is for: an endpoint's canary keeps one on one version."""


@dataclass(frozen=True)
class ChatRequest:
    sampling: Sampling
    messages: tuple[ChatMessage, ...]
    """As the engine renders them (with the tools described, when there are tools)."""
    tools: ToolPlan | None = None


@dataclass(frozen=True)
class CompletionRequest:
    sampling: Sampling
    prompts: tuple[str, ...]
    """One or more prompts: each is a call of its own, with ``n`` choices."""


@dataclass(frozen=True)
class EmbeddingRequest:
    model: str
    texts: tuple[str, ...]
    encoding_format: str = "float"
    dimensions: int | None = None
    user: str | None = None
    priority: Priority | None = None
    """The ``priority`` extension; None: the target's own (an endpoint's, else
    interactive)."""


def load_json(body: bytes) -> dict[str, Any]:
    """The body as a JSON object (400 ``invalid_json`` / ``invalid_request``)."""
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise InvalidInput(f"request body is not valid JSON: {exc}", code="invalid_json") from None
    if not isinstance(doc, dict):
        raise InvalidInput("request body must be a JSON object", code="invalid_request")
    return doc


def parse_chat(doc: Mapping[str, Any]) -> ChatRequest:
    _refuse_unsupported(doc, chat=True)
    messages = _messages(doc.get("messages"))
    logprobs = bool(_bool(doc, "logprobs"))
    top = _int(doc, "top_logprobs", 0, MAX_TOP_LOGPROBS)
    if top is not None and not logprobs:
        raise _invalid("top_logprobs needs logprobs set to true", "top_logprobs")
    sampling = _sampling(doc, None, logprobs=logprobs, top_logprobs=top)
    plan = parse_tools(doc.get("tools"), doc.get("tool_choice"))
    if plan is None:
        return ChatRequest(sampling, messages)
    if "response_format" in sampling.parameters:
        raise _invalid("response_format cannot be combined with tools", "response_format")
    constrained = {"type": "json_schema", "schema": plan.schema}
    parameters = {**sampling.parameters, "response_format": constrained}
    return ChatRequest(replace(sampling, parameters=parameters), plan.messages(messages), plan)


def parse_completion(doc: Mapping[str, Any]) -> CompletionRequest:
    _refuse_unsupported(doc, chat=False)
    prompts = _prompts(doc.get("prompt"))
    count = _int(doc, "logprobs", 0, MAX_COMPLETION_LOGPROBS)
    sampling = _sampling(
        doc,
        DEFAULT_COMPLETION_MAX_TOKENS,
        logprobs=count is not None,
        top_logprobs=count or None,
    )
    return CompletionRequest(sampling, prompts)


def parse_embedding(doc: Mapping[str, Any]) -> EmbeddingRequest:
    model = _model(doc)
    raw = doc.get("input")
    if isinstance(raw, str):
        texts: tuple[str, ...] = (raw,)
    elif isinstance(raw, list) and raw and all(isinstance(t, str) for t in raw):
        texts = tuple(raw)
    elif isinstance(raw, list) and raw and all(isinstance(t, int | list) for t in raw):
        raise InvalidInput(
            "input as token ids is not supported: send the texts",
            code="unsupported_parameter",
            param="input",
        )
    else:
        raise _invalid("input must be a string or a non-empty list of strings", "input")
    if len(texts) > MAX_EMBEDDING_INPUTS:
        raise _invalid(f"input may hold at most {MAX_EMBEDDING_INPUTS} texts", "input")
    if any(not t for t in texts):
        raise _invalid("input texts must not be empty", "input")
    encoding = doc.get("encoding_format")
    if encoding is None:
        encoding = "float"
    if encoding not in ("float", "base64"):
        raise _invalid("encoding_format must be 'float' or 'base64'", "encoding_format")
    dimensions = _int(doc, "dimensions", 1, 1 << 20)
    priority = _priority(doc) if doc.get("priority") is not None else None
    return EmbeddingRequest(model, texts, encoding, dimensions, _user(doc), priority)


# ---- shared fields
def _model(doc: Mapping[str, Any]) -> str:
    model = doc.get("model")
    if not isinstance(model, str) or not model:
        raise InvalidInput("model is required (a string)", code="missing_parameter", param="model")
    return model


def _sampling(
    doc: Mapping[str, Any], default_max: int | None, *, logprobs: bool, top_logprobs: int | None
) -> Sampling:
    model = _model(doc)
    max_tokens = _int(doc, "max_completion_tokens", 1, MAX_TOKENS_LIMIT, "invalid_max_tokens")
    if max_tokens is None:
        max_tokens = _int(doc, "max_tokens", 1, MAX_TOKENS_LIMIT, "invalid_max_tokens")
    n = _int(doc, "n", 1, MAX_CHOICES, "invalid_n") or 1
    stream = bool(_bool(doc, "stream"))
    include_usage = False
    options = doc.get("stream_options")
    if options is not None:
        if not isinstance(options, dict):
            raise _invalid("stream_options must be an object", "stream_options")
        if not stream:
            raise _invalid("stream_options is only allowed with stream: true", "stream_options")
        include_usage = bool(_bool(options, "include_usage", "stream_options.include_usage"))
    parameters: dict[str, Any] = {}
    temperature = _number(doc, "temperature", 0.0, 2.0)
    if temperature is not None:
        parameters["temperature"] = temperature
    top_p = _number(doc, "top_p", 0.0, 1.0)
    if top_p is not None:
        if top_p == 0.0:
            raise _invalid("top_p must be above 0 and at most 1", "top_p")
        parameters["top_p"] = top_p
    top_k = _int(doc, "top_k", 0, 1 << 20)
    if top_k is not None:
        parameters["top_k"] = top_k
    stop = _stop(doc.get("stop"))
    if stop:
        parameters["stop"] = stop
    seed = _int(doc, "seed", -(1 << 63), (1 << 64) - 1)
    if seed is not None:
        parameters["seed"] = seed
    for penalty in ("presence_penalty", "frequency_penalty"):
        value = _number(doc, penalty, -2.0, 2.0)
        if value:
            parameters[penalty] = value
    bias = _logit_bias(doc.get("logit_bias"))
    if bias:
        parameters["logit_bias"] = bias
    response_format = _response_format(doc.get("response_format"))
    if response_format is not None:
        parameters["response_format"] = response_format
    if logprobs:
        parameters["logprobs"] = True
        if top_logprobs:
            parameters["top_logprobs"] = top_logprobs
    return Sampling(
        model=model,
        max_tokens=max_tokens or default_max,
        n=n,
        stream=stream,
        include_usage=include_usage,
        parameters=parameters,
        logprobs=logprobs,
        priority=_priority(doc),
        user=_user(doc),
    )


MAX_USER = 256


def _user(doc: Mapping[str, Any]) -> str | None:
    """OpenAI's ``user``: who the call is for (an endpoint's sticky routing subject)."""
    value = doc.get("user")
    if value is None or value == "":
        return None
    if not isinstance(value, str) or len(value) > MAX_USER:
        raise _invalid(f"user must be a string of at most {MAX_USER} characters", "user")
    return value


def _priority(doc: Mapping[str, Any]) -> Priority:
    """The ``priority`` extension: ``interactive`` (the default), ``batch`` or
    ``offline``."""
    value = doc.get("priority")
    if value is None:
        return Priority.INTERACTIVE
    try:
        return Priority(value)
    except ValueError:
        raise _invalid("priority must be 'interactive', 'batch' or 'offline'", "priority") from None


def _messages(raw: Any) -> tuple[ChatMessage, ...]:
    if not isinstance(raw, list) or not raw:
        raise _invalid("messages must be a non-empty list", "messages")
    messages = []
    for i, message in enumerate(raw):
        where = f"messages[{i}]"
        if not isinstance(message, dict):
            raise _invalid(f"{where} must be an object", where)
        role = message.get("role")
        if role not in ROLES:
            raise _invalid(f"{where}.role must be one of {', '.join(sorted(ROLES))}", where)
        if message.get("function_call"):
            raise InvalidInput(
                "function_call is deprecated and not supported: use tool_calls",
                code="unsupported_parameter",
                param=where,
            )
        calls = _tool_calls(message.get("tool_calls"), where) if role == "assistant" else ()
        call_id = message.get("tool_call_id")
        if role == "tool" and not isinstance(call_id, str):
            raise _invalid(f"{where}.tool_call_id is required for a tool message", where)
        content = "" if calls and message.get("content") is None else _content(message)
        role = "system" if role == "developer" else role
        messages.append(ChatMessage(role, content, calls, call_id if role == "tool" else None))
    return tuple(messages)


def _tool_calls(raw: Any, where: str) -> tuple[ToolCall, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise _invalid(f"{where}.tool_calls must be a list", where)
    calls = []
    for call in raw:
        function = call.get("function") if isinstance(call, dict) else None
        if (
            not isinstance(function, dict)
            or not isinstance(call.get("id"), str)
            or not isinstance(function.get("name"), str)
            or not isinstance(function.get("arguments"), str)
        ):
            raise _invalid(
                f"{where}.tool_calls items need an id and a function's name and arguments", where
            )
        calls.append(ToolCall(call["id"], function["name"], function["arguments"]))
    return tuple(calls)


def _content(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "text":
                raise InvalidInput(
                    "only text content parts are supported",
                    code="unsupported_parameter",
                    param="messages",
                )
            text = part.get("text")
            if not isinstance(text, str):
                raise _invalid("a text content part needs its text", "messages")
            texts.append(text)
        return "".join(texts)
    raise _invalid("a message's content must be a string or a list of text parts", "messages")


def _prompts(raw: Any) -> tuple[str, ...]:
    if isinstance(raw, str):
        return (raw,)
    if isinstance(raw, list) and raw and all(isinstance(p, str) for p in raw):
        if len(raw) > MAX_PROMPTS:
            raise _invalid(f"prompt may hold at most {MAX_PROMPTS} strings", "prompt")
        return tuple(raw)
    if isinstance(raw, list) and raw and all(isinstance(p, int | list) for p in raw):
        raise InvalidInput(
            "prompts as token ids are not supported: send the text",
            code="unsupported_parameter",
            param="prompt",
        )
    raise _invalid("prompt must be a string or a non-empty list of strings", "prompt")


def _stop(raw: Any) -> list[str]:
    if raw is None:
        return []
    stops = [raw] if isinstance(raw, str) else raw
    if not isinstance(stops, list) or not all(isinstance(s, str) and s for s in stops):
        raise _invalid("stop must be a non-empty string or a list of them", "stop")
    if len(stops) > MAX_STOP:
        raise _invalid(f"stop may hold at most {MAX_STOP} sequences", "stop")
    return list(stops)


_NEUTRAL: dict[str, tuple[Any, ...]] = {
    "functions": ([],),
    "function_call": ("none",),
    "echo": (False,),
    "best_of": (1,),
    "suffix": ("",),
    "tools": ([],),
    "tool_choice": ("none",),
}
_CHAT_ONLY = ("functions", "function_call", "tools", "tool_choice")
_COMPLETION_ONLY = ("echo", "best_of", "suffix")
MAX_LOGIT_BIAS = 300


def _refuse_unsupported(doc: Mapping[str, Any], *, chat: bool) -> None:
    # Tools are the chat's (``parse_tools``); each endpoint ignores the other's fields.
    skipped = (*_COMPLETION_ONLY, "tools", "tool_choice") if chat else _CHAT_ONLY
    for name, neutral in _NEUTRAL.items():
        value = doc.get(name)
        if name in skipped or value is None or any(value == v for v in neutral):
            continue
        raise InvalidInput(
            f"{name} is not supported by this server", code="unsupported_parameter", param=name
        )


def _logit_bias(raw: Any) -> dict[str, float] | None:
    """OpenAI's ``logit_bias``: token ids (as strings) to a bias from -100 to 100."""
    if raw is None or raw == {}:
        return None
    if not isinstance(raw, dict) or len(raw) > MAX_LOGIT_BIAS:
        raise _invalid(
            f"logit_bias must map at most {MAX_LOGIT_BIAS} token ids to numbers", "logit_bias"
        )
    for key, value in raw.items():
        if not str(key).isdigit():
            raise _invalid(f"logit_bias key {key!r} is not a token id", "logit_bias")
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not -100 <= value <= 100
        ):
            raise _invalid("logit_bias values must be numbers from -100 to 100", "logit_bias")
    return {str(k): float(v) for k, v in raw.items()}


def _response_format(raw: Any) -> dict[str, Any] | None:
    """``text`` (None), ``json_object``, or ``json_schema`` with its schema."""
    if raw is None:
        return None
    kind = raw.get("type") if isinstance(raw, dict) else None
    if kind == "text":
        return None
    if kind == "json_object":
        return {"type": "json_object"}
    if kind == "json_schema":
        spec = raw.get("json_schema")
        schema = spec.get("schema") if isinstance(spec, dict) else None
        if not isinstance(schema, dict):
            raise _invalid("response_format.json_schema needs its schema", "response_format")
        return {"type": "json_schema", "schema": schema}
    raise _invalid(
        "response_format.type must be text, json_object or json_schema", "response_format"
    )


# ---- scalars
def _invalid(message: str, param: str, code: str = "invalid_parameter") -> InvalidInput:
    return InvalidInput(message, code=code, param=param)


def _bool(doc: Mapping[str, Any], name: str, param: str | None = None) -> bool | None:
    value = doc.get(name)
    if value is None or isinstance(value, bool):
        return value
    raise _invalid(f"{name} must be true or false", param or name)


def _int(
    doc: Mapping[str, Any], name: str, lo: int, hi: int, code: str = "invalid_parameter"
) -> int | None:
    value = doc.get(name)
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise _invalid(f"{name} must be an integer from {lo} to {hi}", name, code)
    return value


def _number(doc: Mapping[str, Any], name: str, lo: float, hi: float) -> float | None:
    value = doc.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not lo <= value <= hi:
        raise _invalid(f"{name} must be a number from {lo:g} to {hi:g}", name)
    return float(value)
