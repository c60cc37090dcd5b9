"""Which engine runs a causal LM package, and the llama.cpp side of loading, describing
and validating a GGUF package.

The platform picks, the package does not: a GGUF file runs on llama.cpp (quantized
weights stay quantized) when the library is usable here, everything else on the
``transformers`` engine. The ``llm_engine`` setting may force ``transformers`` for every
package; a manifest's ``runtime.engine`` (``llama.cpp`` or ``transformers``) pins one
version (``modelport push`` records the engine it computed the example with, so that
validation and serving decode as the example did).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from modelport.errors import InvalidInput
from modelport.manifest import Example, Manifest
from modelport.runtime.formats.transformers.greedy import Greedy
from modelport.runtime.formats.transformers.package import PackageLayout
from modelport.runtime.generative.sampling import SamplingParams
from modelport.runtime.types import ChatMessage, GenerationRequest

_log = logging.getLogger(__name__)

LLAMA_CPP = "llama.cpp"
TRANSFORMERS = "transformers"
ENGINES = (LLAMA_CPP, TRANSFORMERS)
AUTO = "auto"


def pinned_engine(manifest: Manifest) -> str | None:
    """The manifest's ``runtime.engine``, checked (``invalid_manifest``)."""
    value = manifest.runtime.get("engine")
    if value is None:
        return None
    if value not in ENGINES:
        raise InvalidInput(
            f"runtime.engine must be one of {', '.join(ENGINES)}", code="invalid_manifest"
        )
    return str(value)


def choose_engine(layout: PackageLayout, *, pinned: str | None, setting: str = AUTO) -> str:
    """The engine for a package: the pin, else llama.cpp for GGUF where it runs."""
    from modelport.runtime.generative.llama.library import llama_problem

    if pinned is not None:
        if pinned == LLAMA_CPP and layout.gguf is None:
            raise InvalidInput(
                "runtime.engine llama.cpp needs a GGUF file in the package",
                code="invalid_manifest",
            )
        return pinned
    if layout.gguf is None or setting == TRANSFORMERS:
        return TRANSFORMERS
    problem = llama_problem()
    if problem is not None:
        _log.warning("GGUF runs on the transformers engine: %s", problem)
        return TRANSFORMERS
    return LLAMA_CPP


@dataclass
class _Row:
    """A sequence as the kernels read it, driven here without the engine's loop."""

    prompt_ids: list[int]
    max_tokens: int
    params: SamplingParams = field(default_factory=lambda: SamplingParams(temperature=0.0))
    output_ids: list[int] = field(default_factory=list)
    choice: int = 0
    state: Any = None


def llama_greedy(
    kernels: Any,
    *,
    prompt: str | None = None,
    messages: Sequence[ChatMessage] | None = None,
    max_tokens: int,
) -> Greedy:
    """Greedy tokens after the prompt (or chat) on llama.cpp, at most ``max_tokens``;
    the end-of-generation token ends it and is not counted."""
    request = GenerationRequest(
        prompt=prompt or "",
        max_tokens=max_tokens,
        messages=tuple(messages) if messages is not None else None,
    )
    ids = kernels.encode(request)
    if not ids:
        raise InvalidInput("the prompt has no tokens", code="empty_prompt")
    row = _Row(ids, max_tokens)
    kernels.open([row])
    try:
        first = True
        while len(row.output_ids) < max_tokens:
            group = next(iter(kernels.step([row], []) if first else kernels.step([], [row])))
            first = False
            token = group[0].token
            if kernels.is_end(token):
                break
            row.output_ids.append(token)
    finally:
        kernels.close(row)
    text = kernels.vocab.decode(row.output_ids)
    return Greedy(prompt_tokens=len(ids), tokens=tuple(row.output_ids), text=text)


def load_kernels(path: Path, *, kv_budget_bytes: int, max_running: int, threads: int) -> Any:
    from modelport.runtime.generative.llama.kernels import LlamaConfig, LlamaKernels

    return LlamaKernels(
        path, LlamaConfig(kv_budget_bytes, max_running=max_running, threads=threads)
    )


def llama_example_outputs(kernels: Any, example: Example) -> dict[str, np.ndarray]:
    """``generate_example`` on llama.cpp: the example's greedy ``tokens`` and ``text``."""
    from modelport.runtime.formats.transformers.examples import (
        MESSAGES,
        PROMPT,
        TEXT,
        TOKENS,
        expected_tokens,
        one_text,
        parse_messages,
    )

    prompt = one_text(example, PROMPT)
    chat = one_text(example, MESSAGES)
    if (prompt is None) == (chat is None):
        raise InvalidInput(
            "a generative example has one input: 'prompt' or 'messages'", code="bad_example"
        )
    got = llama_greedy(
        kernels,
        prompt=prompt,
        messages=parse_messages(chat) if chat is not None else None,
        max_tokens=len(expected_tokens(example)),
    )
    text = np.empty(1, dtype=np.object_)
    text[0] = got.text.encode()
    return {TOKENS: np.asarray(got.tokens, dtype=np.int64), TEXT: text}


def describe_llama(path: Path, runtime: dict[str, Any]) -> dict[str, Any]:
    """Manifest fields of a GGUF causal LM described on llama.cpp (see ``describe``)."""
    from modelport.runtime.formats.transformers.describe import (
        EXAMPLE_CHAT,
        EXAMPLE_PROMPT,
        EXAMPLE_TOKENS,
        causal_fields,
    )
    from modelport.runtime.formats.transformers.examples import example_from
    from modelport.runtime.generative.llama.library import require_llama

    lib = require_llama()
    kernels = load_kernels(path, kv_budget_bytes=16 << 20, max_running=1, threads=0)
    try:
        chat = bool(kernels.vocab.chat_template)
        if chat:
            messages = tuple(ChatMessage(m["role"], m["content"]) for m in EXAMPLE_CHAT)
            greedy = llama_greedy(kernels, messages=messages, max_tokens=EXAMPLE_TOKENS)
            example = example_from(greedy, chat=EXAMPLE_CHAT)
        else:
            greedy = llama_greedy(kernels, prompt=EXAMPLE_PROMPT, max_tokens=EXAMPLE_TOKENS)
            example = example_from(greedy, prompt=EXAMPLE_PROMPT)
        parameters = int(lib.llama_model_n_params(kernels._model))
        runtime = {**runtime, "context_length": kernels.context_length, "engine": LLAMA_CPP}
    finally:
        kernels.unload()
    return causal_fields(chat, runtime, parameters, [example] if greedy.tokens else [])
