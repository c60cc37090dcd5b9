"""Driving an engine from a test: collect a generation's chunks, and the reference
output of ``model.generate`` run alone."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from modelport.runtime.formats.base import Generation
from modelport.runtime.types import GenerationChunk


@dataclass
class Collected:
    chunks: list[GenerationChunk] = field(default_factory=list)

    def choice(self, i: int = 0) -> list[GenerationChunk]:
        return [c for c in self.chunks if c.choice == i]

    def text(self, i: int = 0) -> str:
        return "".join(c.text for c in self.choice(i))

    def tokens(self, i: int = 0) -> int:
        return sum(c.tokens for c in self.choice(i))

    def finish(self, i: int = 0) -> str | None:
        return self.choice(i)[-1].finish_reason

    def logprobs(self, i: int = 0) -> list[float]:
        return [p for c in self.choice(i) for p in (c.logprobs or ())]


async def collect(generation: Generation) -> Collected:
    out = Collected()
    async for chunk in generation:
        out.chunks.append(chunk)
    return out


@dataclass
class Reference:
    ids: list[int]
    text: str
    scores: list[torch.Tensor]


def reference(model: Any, tokenizer: Any, prompt_ids: list[int], max_tokens: int) -> Reference:
    """Greedy ``generate`` of ``prompt_ids`` alone (stopping at the tokenizer's EOS)."""
    with torch.inference_mode():
        out = model.generate(
            torch.tensor([prompt_ids]),
            attention_mask=torch.ones((1, len(prompt_ids)), dtype=torch.long),
            max_new_tokens=max_tokens,
            do_sample=False,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id,
            output_scores=True,
            return_dict_in_generate=True,
        )
    ids = out.sequences[0, len(prompt_ids) :].tolist()
    text = tokenizer.decode(ids, skip_special_tokens=True)
    return Reference(ids, text, list(out.scores))


def wait_until(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    """Poll ``condition`` until it holds (the timeout only guards against a hang)."""
    end = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > end:
            raise AssertionError("condition not reached")
        time.sleep(0.005)


def sample_value(engine: Any, name: str) -> float:
    value = engine.metrics_holder.registry.get_sample_value(
        name, {"model": "acme/tiny", "version": "1"}
    )
    return float(value or 0.0)
