"""Generation over HTTP, three ways, in one run: SmolLM2-135M-Instruct (Q4_1 GGUF).

- ``platform llama.cpp``: the platform's ``/v1`` (a consumer's key, limits, metering)
  with the version on the llama.cpp engine (``bench/chat_platform_server.py``);
- ``llama.cpp server``: ``llama-cpp-python``'s own OpenAI server
  (``python -m llama_cpp.server``), the same file and threads, answering one request
  at a time as it does;
- ``platform transformers``: the same platform, the version pinned to the
  ``transformers`` engine (the GGUF de-quantized).

For each number of concurrent streams (all sent at once, greedy chats of up to
``--tokens`` tokens, through the ``openai`` SDK), it prints generated tokens/s, time
to first token p50/p99, and the server's CPU milliseconds per generated token (its
process and its model hosts), then the ratios the issue sets targets for. The platform
runs with its default execution (``--execution process``: each engine in a sandboxed
model host); ``--execution manifest`` runs the engines in the server process.

    PYTHONPATH=src:. .venv/bin/python bench/generative_bench.py
    PYTHONPATH=src:. .venv/bin/python bench/generative_bench.py --streams 1 16 --tokens 64
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import openai
import psutil
from bench.generation_runs import QUESTIONS, Run
from tests.runtime.formats.transformers.packages import smollm2_gguf


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_up(url: str, proc: subprocess.Popen[bytes], seconds: float = 300) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the server at {url} exited")
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.TransportError:
            time.sleep(0.2)
    raise SystemExit(f"{url} did not start")


async def load(
    base: str, key: str, model: str, streams: int, tokens: int
) -> tuple[int, list[float]]:
    """``streams`` chats at once; generated tokens (as each answer's usage says) and the
    time to each one's first text."""
    start = time.perf_counter()
    async with openai.AsyncOpenAI(base_url=base, api_key=key, max_retries=0, timeout=600) as client:

        async def one(i: int) -> tuple[int, float]:
            stream = await client.chat.completions.create(
                model=model,
                messages=[{"role": "user", "content": QUESTIONS[i % len(QUESTIONS)]}],
                max_tokens=tokens,
                temperature=0,
                stream=True,
                stream_options={"include_usage": True},
            )
            first, produced, pieces = 0.0, 0, 0
            async for chunk in stream:
                if chunk.choices and chunk.choices[0].delta.content:
                    pieces += 1
                    if not first:
                        first = time.perf_counter() - start
                if chunk.usage is not None:
                    produced = chunk.usage.completion_tokens
            # llama.cpp's server reports no usage on a stream: it sends a chunk a token.
            return produced or pieces, first

        done = await asyncio.gather(*(one(i) for i in range(streams)))
    return sum(p for p, _ in done), [f for _, f in done if f]


def tree_cpu(pid: int) -> float:
    """CPU seconds of a server and its descendants (the platform's model hosts)."""
    top = psutil.Process(pid)
    total = 0.0
    for each in [top, *top.children(recursive=True)]:
        try:
            times = each.cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system
    return total


def measure(
    base: str, key: str, model: str, pid: int, streams: int, tokens: int, repeat: int
) -> Run:
    """``repeat`` bursts of ``streams`` chats: tokens and seconds summed, every stream's
    time to first token kept (one short burst is at the mercy of a shared machine)."""
    asyncio.run(load(base, key, model, 1, 4))  # warm: the model loads, caches fill
    total = Run(0, 0.0, [], 0.0)
    for _ in range(repeat):
        before = tree_cpu(pid)
        start = time.perf_counter()
        produced, ttft = asyncio.run(load(base, key, model, streams, tokens))
        total.seconds += time.perf_counter() - start
        total.cpu_seconds += tree_cpu(pid) - before
        total.tokens += produced
        total.ttft += ttft
    return total


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--streams", type=int, nargs="+", default=[1, 4, 16, 64])
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--platform-threads", type=int, default=None, help="the platform's (default: --threads)"
    )
    parser.add_argument("--skip-transformers", action="store_true")
    parser.add_argument("--repeat", type=int, default=3, help="bursts per point")
    parser.add_argument("--execution", choices=["process", "manifest"], default="process")
    args = parser.parse_args()
    gguf = smollm2_gguf()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MODELPORT_")}
    procs: list[subprocess.Popen[bytes]] = []
    try:
        home = Path(tempfile.mkdtemp(prefix="genbench-"))
        port = free_port()
        platform = subprocess.Popen(
            [sys.executable, "bench/chat_platform_server.py", str(home), str(port)],
            env=env
            | {
                "MODELPORT_LLM_THREADS": str(args.platform_threads or args.threads),
                "MODELPORT_LLM_MAX_RUNNING": str(max(args.streams)),
                "MODELPORT_LLM_KV_CACHE_BYTES": str(512 << 20),
                # The default: each version's engine in a sandboxed model host.
                "MODELPORT_RUNTIME_EXECUTION": args.execution,
            },
            stdout=subprocess.PIPE,
        )
        procs.append(platform)
        assert platform.stdout is not None
        line = platform.stdout.readline().decode().split()
        if not line or line[0] != "READY":
            raise SystemExit("the platform server did not start")
        key = line[1]
        wait_up(f"http://127.0.0.1:{port}/healthz", platform)
        llama_port = free_port()
        server = subprocess.Popen(
            [
                sys.executable, "-m", "llama_cpp.server", "--model", str(gguf),
                "--n_threads", str(args.threads), "--n_ctx", "2048",
                "--port", str(llama_port), "--host", "127.0.0.1",
                # Queue concurrent requests (its default interrupts the running one).
                "--interrupt_requests", "False", "--flash_attn", "True",
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        procs.append(server)
        wait_up(f"http://127.0.0.1:{llama_port}/v1/models", server)

        ways = [
            ("platform llama.cpp", f"http://127.0.0.1:{port}/v1", key, "acme/smollm2:llama", platform.pid),
            ("llama.cpp server", f"http://127.0.0.1:{llama_port}/v1", "x", "smollm2", server.pid),
        ]  # fmt: skip
        if not args.skip_transformers:
            ways.append(
                ("platform transformers", f"http://127.0.0.1:{port}/v1", key, "acme/smollm2:torch", platform.pid)
            )  # fmt: skip
        print(f"SmolLM2-135M-Instruct Q4_1, greedy chats of up to {args.tokens} tokens, "
              f"{args.threads} threads, {os.cpu_count()} CPUs")  # fmt: skip
        print(
            f"{'streams':>7} {'way':<22} {'tok/s':>8} {'TTFT p50':>9} {'TTFT p99':>9} {'CPU ms/tok':>10}"
        )
        results: dict[tuple[int, str], Run] = {}
        for streams in args.streams:
            for name, base, secret, model, pid in ways:
                run = measure(base, secret, model, pid, streams, args.tokens, args.repeat)
                results[(streams, name)] = run
                print(
                    f"{streams:>7} {name:<22} {run.tokens_per_second:>8.1f} "
                    f"{run.ttft_pct(0.5):>8.3f}s {run.ttft_pct(0.99):>8.3f}s "
                    f"{run.cpu_ms_per_token:>10.2f}"
                )
        print("\nratios of tokens/s (targets: 1 stream >= 0.9x the llama.cpp server; "
              "16 streams >= 3x it and >= 5x transformers)")  # fmt: skip
        for streams in args.streams:
            ours = results[(streams, "platform llama.cpp")].tokens_per_second
            bare = results[(streams, "llama.cpp server")].tokens_per_second
            line = f"{streams:>7} streams: {ours / bare:.2f}x the llama.cpp server"
            torch_run = results.get((streams, "platform transformers"))
            if torch_run is not None:
                line += f", {ours / torch_run.tokens_per_second:.2f}x the transformers engine"
            print(line)
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(30)


if __name__ == "__main__":
    main()
