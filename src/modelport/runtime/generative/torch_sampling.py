"""The choice of each next token on torch (the ``transformers`` engine).

Each sequence owns a ``torch.Generator`` seeded from the request's ``seed`` (choice ``i``
uses ``seed + i``), and rows are sampled one by one with their own generator: a
sequence's draws depend on its seed alone, never on which other sequences share its
batch. Temperature 0 is greedy (argmax). Log-probabilities are those of the model's
distribution (before penalties, temperature, top-k and top-p), as vLLM reports them.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from modelport.runtime.generative.sampling import SamplingParams


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
    outputs: Sequence[Sequence[int]] = (),
) -> tuple[list[int], list[float | None]]:
    """The next token of each row of ``logits`` ([rows, vocab]) and, where asked, its
    log-probability; ``outputs`` (each row's generated tokens) feed the penalties."""
    logits = logits.float()
    raw = logits
    for row, p in enumerate(params):
        if p.penalized or p.logit_bias:
            if raw is logits:
                logits = logits.clone()
            _adjust(logits[row], p, outputs[row] if outputs else ())
    tokens = torch.argmax(logits, dim=-1)
    for row, p in enumerate(params):
        if not p.greedy:
            tokens[row] = _draw(logits[row], p, generators[row])
    chosen = tokens.tolist()
    logprobs: list[float | None] = [None] * len(params)
    wanted = [row for row, p in enumerate(params) if p.logprobs]
    if wanted:
        index = torch.tensor(wanted)
        picked = torch.log_softmax(raw[index], dim=-1).gather(-1, tokens[index, None])
        for row, value in zip(wanted, picked[:, 0].tolist(), strict=True):
            logprobs[row] = value
    return chosen, logprobs


def _adjust(row: torch.Tensor, p: SamplingParams, output: Sequence[int]) -> None:
    """OpenAI's penalties and ``logit_bias``, in place on one row of logits."""
    vocab = row.shape[-1]
    if p.penalized and output:
        ids, counts = torch.unique(torch.tensor(list(output), dtype=torch.long), return_counts=True)
        row[ids] -= counts.to(row.dtype) * p.frequency_penalty + p.presence_penalty
    for token, bias in p.logit_bias:
        if token < vocab:
            row[token] += bias


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
    if p.min_p > 0.0:
        probs = probs.masked_fill(probs < p.min_p * probs.max(), 0.0)
    if probs.device != generator.device:
        probs = probs.to(generator.device)
    return torch.multinomial(probs, 1, generator=generator)[0].to(logits.device)
