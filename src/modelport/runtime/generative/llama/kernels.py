"""llama.cpp kernels: a GGUF model's steps on llama.cpp, under the platform's scheduler.

One context holds one KV cache (``kv_unified``: every sequence's cells in one buffer of
``capacity_tokens`` cells); each running sequence has a llama.cpp sequence id. A step
is one ``llama_decode`` of one ``llama_batch``: every decoding sequence's newest token
and the admitted sequences' prompts (the part not already in their cells), each row's
logits marked for its last token only. Each sequence samples with its own
llama.cpp sampler chain (logit bias, penalties, grammar, top-k, top-p, min-p,
temperature, a seeded draw; or greedy), so results match llama.cpp's own server for
the same seed. Quantized weights stay quantized.

Prefix caching (``prefix.PrefixCache``): a sequence that leaves keeps its cells under
its id while room allows; an admitted sequence whose prompt begins with what a kept or
running sequence computed copies those cells (``llama_memory_seq_cp``: shared, not
duplicated) and computes only the rest. Sequences admitted together that share a
prefix compute it once: the first computes it, the others copy it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from modelport.errors import InvalidInput, Unavailable, Unprocessable
from modelport.runtime.generative.kernels import Sampled
from modelport.runtime.generative.llama.grammar import grammar_for
from modelport.runtime.generative.llama.library import recent_errors, require_llama
from modelport.runtime.generative.llama.prefix import (
    MIN_SHARED_TOKENS,
    PrefixCache,
    common_prefix,
)
from modelport.runtime.generative.llama.vocab import LlamaVocab
from modelport.runtime.generative.sampling import SamplingParams
from modelport.runtime.types import GenerationRequest

LOAD_FAILED = "load_failed"
MIN_BURST_PREFIX = 64
"""A prefix that sequences admitted together share is computed once, ahead of the step,
from this many tokens on."""
MAX_SEQUENCES = 256
"""llama.cpp's sequence ids per context (``LLAMA_MAX_SEQ``)."""
_DEFAULT_SEED = 0xFFFFFFFF
"""llama.cpp's "draw a fresh seed"."""


def cpu_threads() -> int:
    """CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


@dataclass
class LlamaConfig:
    kv_budget_bytes: int
    max_running: int = 32
    threads: int = 0
    """0: every CPU the process may use."""
    max_kept_prefixes: int = 16
    """Sequences whose cells are kept after they leave, for prefix reuse (0: none)."""
    prefix_cache: bool = True
    """Reuse computed prefixes (kept, running, or shared within an admission); off, every
    prompt is computed whole (the baseline ``bench/prefix_cache_bench.py`` measures)."""
    flash_attention: bool = True
    """Attention that skips other sequences' cells: a prefix reused from the cache, or a
    preempted sequence resumed from its kept cells, decodes exactly as if computed in
    one go (without it, sums over padded cell ranges round differently)."""


@dataclass
class _LlamaState:
    seq_id: int
    sampler: Any
    computed: list[int] = field(default_factory=list)
    """The tokens in this sequence's cells, in order of position."""
    pending: list[int] = field(default_factory=list)
    """Tokens of this step's batch for this sequence (not yet in its cells)."""
    logits_index: int = -1


class LlamaKernels:
    """Steps of a GGUF model on llama.cpp (implements ``Kernels``)."""

    kind = "llama.cpp"

    def __init__(self, path: Path, config: LlamaConfig) -> None:
        lib = require_llama()
        self._lib = lib
        params = lib.llama_model_default_params()
        params.use_mmap = True
        model = lib.llama_model_load_from_file(str(path).encode(), params)
        if not model:
            raise Unprocessable(
                f"llama.cpp could not load this GGUF file: {recent_errors() or 'no reason given'}",
                code=LOAD_FAILED,
            )
        self._model = model
        self.vocab = LlamaVocab(lib, model)
        self.tokenizer = self.vocab
        self.context_length = int(lib.llama_model_n_ctx_train(model))
        self.bytes_per_token = _kv_bytes_per_token(lib, model)
        capacity = max(256, config.kv_budget_bytes // self.bytes_per_token)
        self.capacity_tokens = capacity
        if config.max_running > MAX_SEQUENCES:
            raise InvalidInput(
                f"llama.cpp decodes at most {MAX_SEQUENCES} sequences together",
                code="invalid_configuration",
            )
        kept = config.max_kept_prefixes if config.prefix_cache else 0
        self._reuse = config.prefix_cache
        self._seq_ids = min(MAX_SEQUENCES, config.max_running + kept)
        self.prefixes = PrefixCache(self._seq_ids, max_kept=self._seq_ids - config.max_running)
        self.reclaimable = self
        threads = config.threads or cpu_threads()
        cparams = lib.llama_context_default_params()
        cparams.n_ctx = capacity
        cparams.n_batch = capacity
        cparams.n_ubatch = min(512, capacity)
        cparams.n_seq_max = self._seq_ids
        cparams.n_threads = threads
        cparams.n_threads_batch = threads
        cparams.kv_unified = True
        cparams.flash_attn_type = (
            lib.LLAMA_FLASH_ATTN_TYPE_ENABLED
            if config.flash_attention
            else lib.LLAMA_FLASH_ATTN_TYPE_DISABLED
        )
        cparams.no_perf = True
        ctx = lib.llama_init_from_model(model, cparams)
        if not ctx:
            lib.llama_model_free(model)
            raise Unprocessable(
                "llama.cpp could not make a context for this model: "
                f"{recent_errors() or 'no reason given'}",
                code=LOAD_FAILED,
            )
        self._ctx = ctx
        self._memory = lib.llama_get_memory(ctx)
        self._batch = lib.llama_batch_init(capacity, 0, 1)
        self._weights_bytes = int(lib.llama_model_size(model))
        self._live: list[Any] = []
        """Sequences holding cells and a sampler (admitted, not yet left)."""
        self._closed = False

    @property
    def held_tokens(self) -> int:
        return self.prefixes.held_tokens

    # -- Kernels: requests -------------------------------------------------------------
    def check(self, params: SamplingParams) -> None:
        if params.response_format is not None:
            grammar_for(params.response_format)  # a schema it cannot turn into a grammar: 400

    def encode(self, request: GenerationRequest) -> list[int]:
        if self._closed:  # the model is freed: its vocabulary with it
            raise Unavailable("the model was unloaded", code="model_unloading", retry_after=1)
        return self.vocab.encode(request)

    def is_end(self, token: int) -> bool:
        return self.vocab.is_end(token)

    # -- Kernels: sequences ------------------------------------------------------------
    def open(self, seqs: list[Any]) -> int:
        hits = 0
        running = [(s.state.seq_id, s.state.computed) for s in self._live if s.state is not None]
        for seq in seqs:
            tokens = seq.prompt_ids + seq.output_ids
            seq_id = self.prefixes.take_id()
            state = _LlamaState(seq_id, self._sampler(seq))
            match = self.prefixes.best(tokens, running) if self._reuse else None
            if match is not None:
                self._lib.llama_memory_seq_cp(self._memory, match.seq_id, seq_id, 0, match.tokens)
                state.computed = tokens[: match.tokens]
                hits += match.tokens
            state.pending = tokens[len(state.computed) :]
            seq.state = state
            self._live.append(seq)
        return hits + (self._share_prefixes(seqs) if self._reuse else 0)

    def close(self, seq: Any) -> None:
        state: _LlamaState = seq.state
        if seq in self._live:
            self._live.remove(seq)
        self._lib.llama_sampler_free(state.sampler)
        for dropped in self.prefixes.keep(state.seq_id, state.computed):
            self._lib.llama_memory_seq_rm(self._memory, dropped, -1, -1)

    def reclaim(self, tokens: int) -> None:
        freed = 0
        while freed < tokens and self.prefixes.kept:
            before = self.prefixes.held_tokens
            seq_id = self.prefixes.drop_oldest()
            self._lib.llama_memory_seq_rm(self._memory, seq_id, -1, -1)
            freed += before - self.prefixes.held_tokens

    # -- Kernels: the step -------------------------------------------------------------
    def step(self, prefill: list[Any], decode: list[Any]) -> Iterator[list[Sampled]]:
        for seq in decode:
            seq.state.pending = [seq.output_ids[-1]]
        rows = [*prefill, *decode]
        self._decode(rows)
        out = []
        for seq in rows:
            state: _LlamaState = seq.state
            token = int(
                self._lib.llama_sampler_sample(state.sampler, self._ctx, state.logits_index)
            )
            logprob = self._logprob(state.logits_index, token) if seq.params.logprobs else None
            out.append(Sampled(seq, token, logprob))
        yield out

    def _share_prefixes(self, prefill: list[Any]) -> int:
        """Admitted sequences that share a prompt prefix nobody computed yet: the first
        computes it alone, the others copy its cells. Answers the tokens copied."""
        copied = 0
        groups: dict[tuple[int, ...], list[Any]] = {}
        for seq in prefill:
            state: _LlamaState = seq.state
            if len(state.pending) > MIN_SHARED_TOKENS:
                key = tuple(state.computed + state.pending)[
                    : len(state.computed) + MIN_SHARED_TOKENS
                ]
                groups.setdefault(key, []).append(seq)
        for group in groups.values():
            if len(group) < 2:
                continue
            leader: _LlamaState = group[0].state
            whole = leader.computed + leader.pending
            shared = min(
                min(common_prefix(whole, s.state.computed + s.state.pending) for s in group[1:]),
                *(len(s.state.computed) + len(s.state.pending) - 1 for s in group),
            )
            if shared < len(leader.computed) + MIN_BURST_PREFIX:
                continue  # a short one costs less in the step's batch than a decode alone
            cut = shared - len(leader.computed)
            rest, leader.pending = leader.pending[cut:], leader.pending[:cut]
            self._decode([group[0]], logits=False)
            leader.pending = rest
            for seq in group[1:]:
                state = seq.state
                self._lib.llama_memory_seq_rm(self._memory, state.seq_id, -1, -1)
                self._lib.llama_memory_seq_cp(self._memory, leader.seq_id, state.seq_id, 0, shared)
                tokens = state.computed + state.pending
                copied += shared - len(state.computed)
                state.computed, state.pending = tokens[:shared], tokens[shared:]
        return copied

    def _decode(self, rows: list[Any], *, logits: bool = True) -> None:
        """One ``llama_decode`` of every row's pending tokens; they join its cells."""
        batch = self._batch
        n = 0
        for seq in rows:
            state: _LlamaState = seq.state
            start = len(state.computed)
            for i, token in enumerate(state.pending):
                batch.token[n] = token
                batch.pos[n] = start + i
                batch.n_seq_id[n] = 1
                batch.seq_id[n][0] = state.seq_id
                batch.logits[n] = 0
                n += 1
            if logits:
                batch.logits[n - 1] = 1
                state.logits_index = n - 1
        batch.n_tokens = n
        code = self._lib.llama_decode(self._ctx, batch)
        if code != 0:
            raise RuntimeError(
                f"llama_decode failed ({code}) on {n} tokens of {len(rows)} rows: "
                f"{recent_errors() or 'no reason given'}"
            )
        for seq in rows:
            state = seq.state
            state.computed.extend(state.pending)
            state.pending = []

    def _logprob(self, index: int, token: int) -> float:
        """The token's log-probability under the model's distribution (before the
        sampler's transformations, as the transformers engine reports it)."""
        pointer = self._lib.llama_get_logits_ith(self._ctx, index)
        logits = np.ctypeslib.as_array(pointer, shape=(self.vocab.n_vocab,))
        top = float(logits.max())
        return float(logits[token]) - top - math.log(float(np.exp(logits - top).sum()))

    def _sampler(self, seq: Any) -> Any:
        """The sequence's sampler chain; a preempted sequence's resumes with the history
        of its penalties and grammar."""
        params: SamplingParams = seq.params
        lib = self._lib
        chain_params = lib.llama_sampler_chain_default_params()
        chain = lib.llama_sampler_chain_init(chain_params)
        add = lib.llama_sampler_chain_add
        if params.logit_bias:
            biases = [(t, b) for t, b in params.logit_bias if t < self.vocab.n_vocab]
            array = (lib.llama_logit_bias * len(biases))()
            for i, (token, bias) in enumerate(biases):
                array[i].token, array[i].bias = token, bias
            add(chain, lib.llama_sampler_init_logit_bias(self.vocab.n_vocab, len(biases), array))
        if params.penalized:
            add(
                chain,
                lib.llama_sampler_init_penalties(
                    self.vocab.n_vocab,
                    seq.max_tokens,  # every generated token counts, as OpenAI defines them
                    1.0,
                    params.frequency_penalty,
                    params.presence_penalty,
                ),
            )
        if params.response_format is not None:
            grammar = lib.llama_sampler_init_grammar(
                self.vocab._vocab, grammar_for(params.response_format).encode(), b"root"
            )
            if not grammar:
                lib.llama_sampler_free(chain)
                raise InvalidInput(
                    "the response_format's schema gave a grammar llama.cpp refused",
                    code="invalid_parameter",
                    param="response_format",
                )
            add(chain, grammar)
        if params.greedy:
            add(chain, lib.llama_sampler_init_greedy())
        else:
            if params.top_k:
                add(chain, lib.llama_sampler_init_top_k(params.top_k))
            if params.top_p < 1.0:
                add(chain, lib.llama_sampler_init_top_p(params.top_p, 1))
            if params.min_p > 0.0:
                add(chain, lib.llama_sampler_init_min_p(params.min_p, 1))
            add(chain, lib.llama_sampler_init_temp(params.temperature))
            seed = params.seed
            add(
                chain,
                lib.llama_sampler_init_dist(
                    _DEFAULT_SEED if seed is None else (seed + seq.choice) & 0xFFFFFFFF
                ),
            )
        for token in seq.output_ids:
            lib.llama_sampler_accept(chain, token)
        return chain

    # -- Kernels: memory and unload ----------------------------------------------------
    def memory_bytes(self) -> int:
        return self._weights_bytes + self.capacity_tokens * self.bytes_per_token

    def unload(self) -> None:
        if self._closed:
            return
        self._closed = True
        lib = self._lib
        for seq in list(self._live):
            lib.llama_sampler_free(seq.state.sampler)
        self._live.clear()
        lib.llama_batch_free(self._batch)
        lib.llama_free(self._ctx)
        lib.llama_model_free(self._model)


def _kv_bytes_per_token(lib: Any, model: Any) -> int:
    """Bytes one token's keys and values take over every layer (f16 cache)."""
    layers = int(lib.llama_model_n_layer(model))
    heads = int(lib.llama_model_n_head(model))
    kv_heads = int(lib.llama_model_n_head_kv(model)) or heads
    head_dim = int(lib.llama_model_n_embd(model)) // max(heads, 1)
    return 2 * layers * kv_heads * head_dim * 2
