"""Prefix caching on the llama.cpp engine: a burst of chats sharing a system prompt, with
the cache on and off, in one run.

SmolLM2-135M-Instruct (Q4_1 GGUF), ``--streams`` greedy chats submitted at once to the
engine (in process, no HTTP), each with the same system prompt of about ``--system``
words and a question of its own, up to ``--tokens`` tokens each. "off" keeps no prefix
and computes every prompt whole; "on" is the engine as it ships (shared prefixes of a
burst computed once, leaving sequences' cells kept). Prints time to first token p50/p99
and the burst's tokens/s for both, alternating, ``--repeat`` bursts each.

    PYTHONPATH=src:. .venv/bin/python bench/prefix_cache_bench.py
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from pathlib import Path

from tests.runtime.formats.transformers.packages import smollm2_gguf

from modelport.runtime.generative.engine import BatchingEngine, EngineConfig
from modelport.runtime.generative.llama.kernels import LlamaConfig, LlamaKernels
from modelport.runtime.types import ChatMessage, GenerationRequest

QUESTIONS = [
    "What is the capital of France?",
    "Write a haiku about the sea.",
    "List three prime numbers.",
    "What does a CPU do?",
    "Why is the sky blue?",
    "Name a famous painting.",
    "How do birds fly?",
    "What is 7 times 8?",
]
WORDS = (
    "You are a careful assistant for a marketplace of models. Answer in one short "
    "sentence, never invent facts, say when you do not know, and be polite. "
)


def engine(gguf: Path, *, cached: bool, streams: int, threads: int) -> BatchingEngine:
    budget = 512 << 20
    kernels = LlamaKernels(
        gguf,
        LlamaConfig(
            budget,
            max_running=streams,
            threads=threads,
            prefix_cache=cached,
        ),
    )
    config = EngineConfig(kv_budget_bytes=budget, context_length=8192, max_running=streams)
    return BatchingEngine(kernels, config, name="bench/smol:1")


async def burst(
    model: BatchingEngine, system: str, streams: int, tokens: int
) -> tuple[list[float], int, float]:
    start = time.perf_counter()

    async def one(i: int) -> tuple[float, int]:
        request = GenerationRequest(
            prompt="",
            max_tokens=tokens,
            parameters={"temperature": 0},
            messages=(ChatMessage("system", system), ChatMessage("user", QUESTIONS[i % 8])),
        )
        first, produced = 0.0, 0
        async for chunk in model.submit(request):
            if chunk.tokens and not first:
                first = time.perf_counter() - start
            produced += chunk.tokens
        return first, produced

    done = await asyncio.gather(*(one(i) for i in range(streams)))
    return [f for f, _ in done], sum(p for _, p in done), time.perf_counter() - start


async def first_chunk(model: BatchingEngine, request: GenerationRequest) -> None:
    async for _ in model.submit(request):
        pass


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--streams", type=int, default=16)
    parser.add_argument("--tokens", type=int, default=16)
    parser.add_argument("--system", type=int, default=200, help="words of system prompt")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    gguf = smollm2_gguf().resolve()
    system = (WORDS * (args.system // len(WORDS.split()) + 1)).strip()
    results: dict[str, tuple[list[float], int, float]] = {"off": ([], 0, 0.0), "on": ([], 0, 0.0)}
    prompt = 0
    for _ in range(args.repeat):
        for name in ("off", "on"):
            model = engine(gguf, cached=name == "on", streams=args.streams, threads=args.threads)
            alone = GenerationRequest(
                prompt="", max_tokens=1, messages=(ChatMessage("system", system),)
            )
            prompt = len(model.encode(alone))
            try:
                # A fresh context's first decode allocates its buffers: not the cache's.
                warm = GenerationRequest(prompt="Hi", max_tokens=1, parameters={"temperature": 0})
                asyncio.run(first_chunk(model, warm))
                ttft, produced, seconds = asyncio.run(
                    burst(model, system, args.streams, args.tokens)
                )
            finally:
                model.unload()
            got = results[name]
            results[name] = (got[0] + ttft, got[1] + produced, got[2] + seconds)
    print(f"{args.streams} chats at once, a shared system prompt of {prompt} tokens, "
          f"{args.tokens} tokens each, {args.repeat} bursts, {args.threads} threads")  # fmt: skip
    for name, (ttft, produced, seconds) in results.items():
        ordered = sorted(ttft)
        p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
        print(
            f"prefix cache {name:>3}: TTFT p50 {statistics.median(ordered):.3f}s p99 {p99:.3f}s, "
            f"{produced / seconds:.1f} tok/s"
        )
    off, on = statistics.median(results["off"][0]), statistics.median(results["on"][0])
    print(f"TTFT p50: {off / on:.2f}x faster with the cache")


if __name__ == "__main__":
    main()
