"""Sampling parameters of a request, parsed and checked the same way for every engine.

Temperature 0 is greedy. Penalties follow OpenAI's definition: each candidate's logit
loses ``frequency_penalty`` times the times it was generated, and ``presence_penalty``
once if it was; ``logit_bias`` adds to the named tokens' logits (-100 bans, +100
forces). ``response_format`` (``json_object`` or ``json_schema``) constrains the output
with a grammar, where the engine has one (``unsupported_parameter`` where it does not).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from modelport.errors import InvalidInput

MAX_STOP_SEQUENCES = 8
MAX_STOP_LENGTH = 256


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    """0: no top-k cut."""
    seed: int | None = None
    logprobs: bool = False
    stop: tuple[str, ...] = ()
    min_p: float = 0.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    logit_bias: tuple[tuple[int, float], ...] = ()
    """(token id, bias) pairs."""
    response_format: ResponseFormat | None = None

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    @property
    def penalized(self) -> bool:
        return bool(self.presence_penalty or self.frequency_penalty)


@dataclass(frozen=True)
class ResponseFormat:
    """Constrained output: any JSON object, or JSON valid against ``schema``."""

    type: str
    """``json_object`` or ``json_schema``."""
    schema: Mapping[str, object] | None = None


def _invalid(message: str) -> InvalidInput:
    return InvalidInput(message, code="invalid_parameter")


def _number(parameters: Mapping[str, object], name: str, default: float) -> float:
    value = parameters.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _invalid(f"'{name}' must be a number")
    return float(value)


def parse_sampling(parameters: Mapping[str, object]) -> SamplingParams:
    """A request's ``parameters`` as ``SamplingParams``; ``invalid_parameter`` when one is
    out of range or of the wrong type. Unknown names are ignored."""
    temperature = _number(parameters, "temperature", 1.0)
    if not 0.0 <= temperature <= 100.0:
        raise _invalid("'temperature' must be between 0 and 100")
    top_p = _number(parameters, "top_p", 1.0)
    if not 0.0 < top_p <= 1.0:
        raise _invalid("'top_p' must be in (0, 1]")
    top_k = parameters.get("top_k") or 0
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 0:
        raise _invalid("'top_k' must be a whole number >= 0")
    seed = parameters.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise _invalid("'seed' must be a whole number")
    logprobs = parameters.get("logprobs") or False
    if not isinstance(logprobs, bool):
        raise _invalid("'logprobs' must be true or false")
    stop = _stops(parameters.get("stop"))
    min_p = _number(parameters, "min_p", 0.0)
    if not 0.0 <= min_p <= 1.0:
        raise _invalid("'min_p' must be between 0 and 1")
    penalties = {}
    for name in ("presence_penalty", "frequency_penalty"):
        penalties[name] = _number(parameters, name, 0.0)
        if not -2.0 <= penalties[name] <= 2.0:
            raise _invalid(f"'{name}' must be between -2 and 2")
    return SamplingParams(
        temperature,
        top_p,
        top_k,
        seed,
        logprobs,
        stop,
        min_p=min_p,
        logit_bias=_logit_bias(parameters.get("logit_bias")),
        response_format=_response_format(parameters.get("response_format")),
        **penalties,
    )


MAX_LOGIT_BIAS = 300


def _logit_bias(value: object) -> tuple[tuple[int, float], ...]:
    if value is None:
        return ()
    if not isinstance(value, Mapping):
        raise _invalid("'logit_bias' must map token ids to numbers")
    if len(value) > MAX_LOGIT_BIAS:
        raise _invalid(f"'logit_bias' holds at most {MAX_LOGIT_BIAS} tokens")
    pairs = []
    for key, bias in value.items():
        try:
            token = int(str(key))
        except ValueError:
            raise _invalid(f"'logit_bias' key {key!r} is not a token id") from None
        if isinstance(bias, bool) or not isinstance(bias, int | float) or not -100 <= bias <= 100:
            raise _invalid("'logit_bias' values must be numbers from -100 to 100")
        if token < 0:
            raise _invalid(f"'logit_bias' key {key!r} is not a token id")
        pairs.append((token, float(bias)))
    return tuple(sorted(pairs))


def _response_format(value: object) -> ResponseFormat | None:
    if value is None or isinstance(value, ResponseFormat):
        return value
    if not isinstance(value, Mapping) or value.get("type") not in ("json_object", "json_schema"):
        raise _invalid("'response_format' must be a json_object or json_schema format")
    schema = value.get("schema")
    if value["type"] == "json_schema" and not isinstance(schema, Mapping):
        raise _invalid("a json_schema response_format needs its schema (an object)")
    return ResponseFormat(str(value["type"]), schema if isinstance(schema, Mapping) else None)


def _stops(value: object) -> tuple[str, ...]:
    if value is None:
        return ()
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list | tuple) or not all(isinstance(s, str) for s in items):
        raise _invalid("'stop' must be a string or a list of strings")
    if len(items) > MAX_STOP_SEQUENCES:
        raise _invalid(f"'stop' holds at most {MAX_STOP_SEQUENCES} sequences")
    if any(not s or len(s) > MAX_STOP_LENGTH for s in items):
        raise _invalid(f"each 'stop' sequence holds 1 to {MAX_STOP_LENGTH} characters")
    return tuple(dict.fromkeys(items))
