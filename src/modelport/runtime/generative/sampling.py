"""Sampling parameters of a request and the choice of each next token.

Each sequence owns a ``torch.Generator`` seeded from the request's ``seed`` (choice ``i``
uses ``seed + i``), and rows are sampled one by one with their own generator: a
sequence's draws depend on its seed alone, never on which other sequences share its
batch. Temperature 0 is greedy (argmax). Log-probabilities are those of the model's
distribution (before temperature, top-k and top-p), as vLLM reports them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

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

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


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
    return SamplingParams(temperature, top_p, top_k, seed, logprobs, stop)


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


def make_generator(seed: int | None, device: str | torch.device = "cpu") -> torch.Generator:
    """A generator seeded with ``seed``, or from fresh entropy without one."""
    generator = torch.Generator(device=device)
    if seed is None:
        generator.seed()
    else:
        generator.manual_seed(seed & 0xFFFF_FFFF_FFFF_FFFF)
    return generator


def sample(
    logits: torch.Tensor,
    params: Sequence[SamplingParams],
    generators: Sequence[torch.Generator],
) -> tuple[list[int], list[float | None]]:
    """The next token of each row of ``logits`` ([rows, vocab]) and, where asked, its
    log-probability."""
    logits = logits.float()
    tokens = torch.argmax(logits, dim=-1)
    for row, p in enumerate(params):
        if not p.greedy:
            tokens[row] = _draw(logits[row], p, generators[row])
    chosen = tokens.tolist()
    logprobs: list[float | None] = [None] * len(params)
    wanted = [row for row, p in enumerate(params) if p.logprobs]
    if wanted:
        index = torch.tensor(wanted)
        picked = torch.log_softmax(logits[index], dim=-1).gather(-1, tokens[index, None])
        for row, value in zip(wanted, picked[:, 0].tolist(), strict=True):
            logprobs[row] = value
    return chosen, logprobs


def _draw(logits: torch.Tensor, p: SamplingParams, generator: torch.Generator) -> torch.Tensor:
    scores = logits / p.temperature
    if p.top_k and p.top_k < scores.shape[-1]:
        kth = torch.topk(scores, p.top_k).values[-1]
        scores = scores.masked_fill(scores < kth, float("-inf"))
    if p.top_p < 1.0:
        ordered, order = torch.sort(scores, descending=True)
        cumulative = torch.softmax(ordered, dim=-1).cumsum(-1)
        # Keep the smallest prefix whose mass reaches top_p (the first token always stays).
        drop = cumulative - torch.softmax(ordered, dim=-1) >= p.top_p
        scores = scores.scatter(-1, order, ordered.masked_fill(drop, float("-inf")))
    probs = torch.softmax(scores, dim=-1)
    if probs.device != generator.device:
        probs = probs.to(generator.device)
    return torch.multinomial(probs, 1, generator=generator)[0].to(logits.device)
