"""What executes a generative engine's steps: the contract between the scheduler's loop
(``engine.BatchingEngine``) and a kernel library.

The loop owns the queues, admission, preemption, stops, streaming and metrics; kernels
own the tokenizer, the KV cells of each sequence, the forward passes and the sampling.
Two implement it: ``torch_engine.TorchKernels`` (``transformers`` models, the reference)
and ``llama.kernels.LlamaKernels`` (GGUF files on llama.cpp).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from modelport.runtime.generative.kv import Reclaimable
from modelport.runtime.generative.sampling import SamplingParams
from modelport.runtime.types import GenerationRequest


class KernelSequence(Protocol):
    """What kernels read of a running sequence (the loop's ``EngineSequence``)."""

    prompt_ids: list[int]
    output_ids: list[int]
    params: SamplingParams
    choice: int
    state: Any
    """The kernels' own per-sequence state (KV cells, sampler), set by ``open``."""


@dataclass(frozen=True)
class Sampled:
    """One sequence's next token, as a step produced it."""

    sequence: Any
    token: int
    logprob: float | None


class Kernels(Protocol):
    kind: str
    """The engine's name in metrics and runtime status (``llama.cpp``, ``transformers``)."""
    capacity_tokens: int
    """KV cells for all sequences together."""
    bytes_per_token: int
    reclaimable: Reclaimable | None
    """Cells kept beyond the running sequences (a prefix cache), given back on demand."""
    tokenizer: Any
    """Has ``decode(ids, skip_special_tokens=True) -> str`` (incremental detokenization)."""

    def check(self, params: SamplingParams) -> None:
        """Refuse what these kernels cannot honour (``unsupported_parameter``)."""
        ...

    def encode(self, request: GenerationRequest) -> list[int]:
        """The prompt's tokens (a chat rendered with the model's template)."""
        ...

    def is_end(self, token: int) -> bool: ...

    def open(self, seqs: list[Any]) -> int:
        """Admitted sequences get their KV cells and sampler state; returns the prompt
        tokens found already computed (prefix cache hits)."""
        ...

    def close(self, seq: Any) -> None:
        """A sequence leaves or is preempted: its cells are freed at once."""
        ...

    def step(self, prefill: list[Any], decode: list[Any]) -> Iterator[list[Sampled]]:
        """Run one step: the admitted sequences' prefill and the others' decode. Yields
        the sampled tokens in groups, each to be streamed before the next is computed."""
        ...

    def memory_bytes(self) -> int: ...

    def unload(self) -> None: ...
