"""Input tokens of tensor calls that count them: embedding models.

A model whose tensors follow the embeddings contract (an input ``text``, BYTES, one
UTF-8 text per row, and an output ``tokens``, INT64, the tokens of each text) is
billed per input token (``Unit.INPUT_TOKEN``) from that output, so a price rule per
input token on its version prices its calls. Its hold is the most a tokenizer can
make of the texts: one token per byte, plus a few markers of its own per text
([CLS]/[SEP], BOS/EOS); the tokens settled never exceed it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from modelport.manifest import TensorSpec

TEXT_INPUT = "text"
TOKENS_OUTPUT = "tokens"
MARKERS_PER_TEXT = 8
"""Tokens a tokenizer may add to each text beyond one per byte."""


def counts_tokens(inputs: Sequence[TensorSpec], outputs: Sequence[TensorSpec]) -> bool:
    """Whether a model with these tensors reports its input tokens (see the docstring)."""
    text = any(s.name == TEXT_INPUT and s.datatype == "BYTES" for s in inputs)
    return text and any(s.name == TOKENS_OUTPUT and s.datatype == "INT64" for s in outputs)


def input_token_bound(inputs: Mapping[str, np.ndarray]) -> int:
    """The most input tokens the texts of ``inputs`` can make."""
    texts = inputs.get(TEXT_INPUT)
    if texts is None:
        return 0
    total = 0
    for text in texts.ravel():
        size = len(text) if isinstance(text, bytes | str) else len(str(text))
        total += size + MARKERS_PER_TEXT
    return total


def input_tokens(outputs: Mapping[str, np.ndarray], bound: int) -> int:
    """The input tokens the model reported, at most ``bound``."""
    counts = outputs.get(TOKENS_OUTPUT)
    if counts is None or counts.size == 0:
        return 0
    return max(0, min(int(np.asarray(counts, dtype=np.int64).sum()), bound))


def with_tokens(outputs: tuple[str, ...] | None) -> tuple[str, ...] | None:
    """The outputs to ask the backend for: those asked for, and ``tokens`` (the bill
    needs it even when the caller does not)."""
    if outputs is None or TOKENS_OUTPUT in outputs:
        return outputs
    return (*outputs, TOKENS_OUTPUT)
