"""What a ``transformers`` package is, as manifest fields (``modelport push``).

The model is loaded on the CPU in float32, as validation loads it, and an example is
computed with the same code validation runs: greedy decoding for a causal LM, the
format's own embeddings for an encoder. So a pushed version validates as it was
described.

- causal LM: task ``chat`` when the tokenizer has a chat template, else
  ``completions``; inputs ``prompt`` / ``messages`` BYTES ``[1]``; outputs ``text``
  BYTES ``[1]`` and ``tokens`` INT64 ``[-1]``;
- encoder: task ``embeddings``; input ``text`` BYTES ``[-1]``; outputs ``embedding``
  FP32 ``[-1, d]`` and ``tokens`` INT64 ``[-1]``; example tolerance ``atol`` 1e-4.

``runtime`` gets ``task``, ``context_length``, ``parameters`` and ``quantization``
(a GGUF file's type such as ``Q4_1``, a ``quantization_config``'s method, or
``none``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from modelport.runtime.formats.transformers.examples import example_from
from modelport.runtime.formats.transformers.gguf_header import quantization
from modelport.runtime.formats.transformers.greedy import generate_greedy
from modelport.runtime.formats.transformers.loading import (
    LoadedCausalLM,
    LoadedEncoder,
    is_generative,
    read_config,
)
from modelport.runtime.formats.transformers.package import check_package
from modelport.runtime.types import ChatMessage

EXAMPLE_CHAT = [{"role": "user", "content": "What is the capital of France?"}]
EXAMPLE_PROMPT = "The capital of France is"
EXAMPLE_TOKENS = 8
EXAMPLE_TEXTS = ["modelport serves models.", "The quick brown fox jumps over the lazy dog."]
EMBEDDING_ATOL = 1e-4
"""Largest difference per embedding component validation accepts. The same model
on another CPU (or thread count) sums in another order: differences stay near 1e-6."""


def describe_package(files: Mapping[str, Path]) -> dict[str, Any]:
    """Manifest fields for the package at ``files`` (see the module docstring)."""
    import torch

    from modelport.runtime.formats.transformers.folder import linked_folder
    from modelport.runtime.formats.transformers.gguf_engine import (
        LLAMA_CPP,
        choose_engine,
        describe_llama,
    )
    from modelport.runtime.formats.transformers.loading import load_causal_lm, load_encoder

    layout = check_package(files)
    if layout.gguf is not None and choose_engine(layout, pinned=None) == LLAMA_CPP:
        return describe_llama(
            files[layout.gguf], {"quantization": quantization(files[layout.gguf])}
        )
    with linked_folder(files, layout) as folder:
        config = read_config(folder, layout)
    if layout.gguf is not None:
        quant = quantization(files[layout.gguf])
    else:
        method = (getattr(config, "quantization_config", None) or {}).get("quant_method")
        quant = str(method) if method else "none"
    context = int(getattr(config, "max_position_embeddings", 0) or 0)
    runtime: dict[str, Any] = {"quantization": quant}
    if context:
        runtime["context_length"] = context
    if is_generative(config, layout):
        described = _causal(load_causal_lm(files, device="cpu", dtype=torch.float32), runtime)
    else:
        described = _encoder(load_encoder(files, device="cpu", dtype=torch.float32), runtime)
    return described


def _causal(loaded: LoadedCausalLM, runtime: dict[str, Any]) -> dict[str, Any]:
    chat = bool(loaded.tokenizer.chat_template)
    if chat:
        greedy = generate_greedy(
            loaded.model,
            loaded.tokenizer,
            messages=tuple(ChatMessage(m["role"], m["content"]) for m in EXAMPLE_CHAT),
            max_tokens=EXAMPLE_TOKENS,
        )
        example = example_from(greedy, chat=EXAMPLE_CHAT)
    else:
        greedy = generate_greedy(
            loaded.model, loaded.tokenizer, prompt=EXAMPLE_PROMPT, max_tokens=EXAMPLE_TOKENS
        )
        example = example_from(greedy, prompt=EXAMPLE_PROMPT)
    examples = [example] if greedy.tokens else []
    if loaded.layout.gguf is not None:
        runtime = {**runtime, "engine": "transformers"}
    return causal_fields(chat, runtime, loaded.parameters, examples)


def causal_fields(
    chat: bool, runtime: dict[str, Any], parameters: int, examples: list[dict[str, Any]]
) -> dict[str, Any]:
    """A causal LM's manifest fields, whichever engine computed its example."""
    return {
        "inputs": [{"name": "messages" if chat else "prompt", "datatype": "BYTES", "shape": [1]}],
        "outputs": [
            {"name": "text", "datatype": "BYTES", "shape": [1]},
            {"name": "tokens", "datatype": "INT64", "shape": [-1]},
        ],
        "runtime": {**runtime, "task": "chat" if chat else "completions", "parameters": parameters},
        "examples": examples,
    }


def _encoder(loaded: LoadedEncoder, runtime: dict[str, Any]) -> dict[str, Any]:
    from modelport.runtime.formats.transformers.embedding import EmbeddingModel

    embedding, tokens = EmbeddingModel(loaded, 0).embed(list(EXAMPLE_TEXTS))
    width = int(embedding.shape[1])
    rows = len(EXAMPLE_TEXTS)
    return {
        "inputs": [{"name": "text", "datatype": "BYTES", "shape": [-1]}],
        "outputs": [
            {"name": "embedding", "datatype": "FP32", "shape": [-1, width]},
            {"name": "tokens", "datatype": "INT64", "shape": [-1]},
        ],
        "runtime": {
            **runtime,
            "task": "embeddings",
            "context_length": loaded.max_length,
            "parameters": loaded.parameters,
        },
        "resources": {"max_batch_size": 32},
        "examples": [
            {
                "inputs": [
                    {
                        "name": "text",
                        "datatype": "BYTES",
                        "shape": [rows],
                        "data": list(EXAMPLE_TEXTS),
                    }
                ],
                "outputs": [
                    {
                        "name": "embedding",
                        "datatype": "FP32",
                        "shape": [rows, width],
                        "data": np.asarray(embedding, dtype=np.float64).tolist(),
                    },
                    {
                        "name": "tokens",
                        "datatype": "INT64",
                        "shape": [rows],
                        "data": [int(t) for t in tokens],
                    },
                ],
                "tolerance": {"atol": EMBEDDING_ATOL, "rtol": 0.0},
            }
        ],
    }
