"""The ``transformers`` kernels: the reference engine, and the fallback for what
llama.cpp does not run.

``TorchKernels`` executes the loop's steps with ``runner.BatchRunner`` (a pool of KV
token slots, prefill of joining sequences, one batched decode) and samples with torch
(``torch_sampling``). ``TorchGenerativeEngine`` is the engine over them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from modelport.errors import InvalidInput
from modelport.runtime.generative.engine import BatchingEngine, EngineConfig
from modelport.runtime.generative.kernels import Sampled
from modelport.runtime.generative.kv import Reclaimable, kv_bytes_per_token
from modelport.runtime.generative.runner import BatchRunner, DecodeRow, PrefillRow
from modelport.runtime.generative.sampling import SamplingParams
from modelport.runtime.generative.stops import eos_token_ids
from modelport.runtime.generative.torch_sampling import make_generator, sample
from modelport.runtime.types import GenerationRequest

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from modelport.runtime.generative.metrics import GenerationMetrics


@dataclass
class _TorchState:
    slots: torch.Tensor
    generator: torch.Generator


class TorchKernels:
    """Steps of a ``transformers`` causal LM on torch (implements ``Kernels``)."""

    kind = "transformers"
    reclaimable: Reclaimable | None = None

    def __init__(
        self, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, config: EngineConfig
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.device = config.device
        self.bytes_per_token = kv_bytes_per_token(model.config, model.dtype)
        self.capacity_tokens = config.kv_budget_bytes // self.bytes_per_token
        self.runner = BatchRunner(model, self.capacity_tokens, config.device)
        self.eos = eos_token_ids(tokenizer, getattr(model, "generation_config", None))
        self._weights_bytes = sum(p.nbytes for p in model.parameters())

    def check(self, params: SamplingParams) -> None:
        if params.response_format is not None:
            raise InvalidInput(
                "response_format (constrained decoding) needs the llama.cpp engine; this"
                " version runs on the transformers engine",
                code="unsupported_parameter",
                param="response_format",
            )

    def encode(self, request: GenerationRequest) -> list[int]:
        tok: Any = self.tokenizer
        if request.messages is not None:
            if not getattr(tok, "chat_template", None):
                raise InvalidInput("this model has no chat template", code="no_chat_template")
            messages = [{"role": m.role, "content": m.content} for m in request.messages]
            text = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
            ids = tok(text, add_special_tokens=False)["input_ids"]
        else:
            ids = tok(request.prompt)["input_ids"]
        return [int(i) for i in ids]

    def is_end(self, token: int) -> bool:
        return token in self.eos

    def open(self, seqs: list[Any]) -> int:
        device = self.device if self.device.startswith("cuda") else "cpu"
        for seq in seqs:
            seed = None if seq.params.seed is None else seq.params.seed + seq.choice
            seq.state = _TorchState(
                self.runner.allocate(seq.reserve_tokens), make_generator(seed, device)
            )
        return 0

    def close(self, seq: Any) -> None:
        self.runner.release(seq.state.slots)

    def step(self, prefill: list[Any], decode: list[Any]) -> Iterator[list[Sampled]]:
        for rows, run in ((prefill, self._prefill), (decode, self._decode)):
            if not rows:
                continue
            with torch.inference_mode():
                logits = run(rows)
                tokens, logprobs = sample(
                    logits,
                    [s.params for s in rows],
                    [s.state.generator for s in rows],
                    [s.output_ids for s in rows],
                )
            yield [Sampled(s, t, lp) for s, t, lp in zip(rows, tokens, logprobs, strict=True)]

    def _prefill(self, rows: list[Any]) -> torch.Tensor:
        return self.runner.prefill(
            [PrefillRow(s.prompt_ids + s.output_ids, s.state.slots) for s in rows]
        )

    def _decode(self, rows: list[Any]) -> torch.Tensor:
        return self.runner.decode(
            [
                DecodeRow(s.output_ids[-1], s.prompt_tokens + len(s.output_ids) - 1, s.state.slots)
                for s in rows
            ]
        )

    def memory_bytes(self) -> int:
        return self._weights_bytes + self.runner.pool_bytes()

    def unload(self) -> None:
        self.runner.pools.clear()


class TorchGenerativeEngine(BatchingEngine):
    """A ``transformers`` causal LM served by continuous batching."""

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        config: EngineConfig,
        *,
        name: str = "",
        metrics: GenerationMetrics | None = None,
    ) -> None:
        self.model = model.eval()
        self.tokenizer = tokenizer
        super().__init__(TorchKernels(model, tokenizer, config), config, name=name, metrics=metrics)

    @property
    def runner(self) -> BatchRunner:
        return self._torch.runner

    @property
    def _torch(self) -> TorchKernels:
        kernels = self.kernels
        assert isinstance(kernels, TorchKernels)
        return kernels
