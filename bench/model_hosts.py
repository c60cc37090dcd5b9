"""What credential-less model hosts cost: a small ONNX model executed on a thread of
this process against the same model in a model host (a worker process started through
the sandbox, as ``MODELPORT_RUNTIME_EXECUTION=process`` runs every version), in one run.

    .venv/bin/python bench/model_hosts.py                       # bubblewrap if usable
    .venv/bin/python bench/model_hosts.py --sandbox unisolated --calls 4000

Two versions of one real ONNX model (add-one, ``x [-1, 4] FP32``) on one ``ModelHost``,
``thread`` and ``process``, the process one started by the ``SandboxLauncher`` the app
builds (clean exec, empty environment, system-call filter, bubblewrap where the mode
asks). Latency: calls one after the other (median and p99 per call). Throughput: calls
kept ``--concurrency`` deep on one event loop (the batcher merges them), calls per
second, and calls per batch (what the batcher merged). The manifests let the batcher
merge up to 64 rows (``resources.max_batch_size``). Rounds of the two modes are
interleaved so the machine's load falls on both; the ratios (process / thread) are what
to read.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from process_exec_bench import Blobs, manifest

from modelport.clock import SystemClock
from modelport.runtime.admission import MemoryBudget
from modelport.runtime.cache import ModelCache
from modelport.runtime.formats import FormatRegistry
from modelport.runtime.host import ModelHost
from modelport.runtime.observer import NullObserver, VersionObserver
from modelport.runtime.process.crashes import CrashLedger
from modelport.runtime.process.executor import ProcessExecutor, ProcessExecutors
from modelport.runtime.process.launching import SandboxLauncher
from modelport.runtime.types import BatchingConfig, VersionKey
from modelport.sandbox import Sandbox, SandboxMode, isolation_available
from modelport.testing.onnx_models import add_one


class BatchCounter:
    """Counts the batches each version executed (its ``batch_executed`` events)."""

    def __init__(self) -> None:
        self.batches: dict[str, int] = {}

    def version(self, model: str, version: str) -> VersionObserver:
        inner = NullObserver().version(model, version)
        self.batches[model] = 0

        def executed(size: int, seconds: float) -> None:
            self.batches[model] += 1

        inner.batch_executed = executed  # type: ignore[method-assign]
        return inner


async def latency(host: ModelHost, key: VersionKey, x: np.ndarray, calls: int) -> list[float]:
    seconds = []
    for _ in range(calls):
        started = time.perf_counter()
        await host.infer(key, {"x": x}, deadline=time.monotonic() + 30)
        seconds.append(time.perf_counter() - started)
    return seconds


async def throughput(
    host: ModelHost, key: VersionKey, x: np.ndarray, calls: int, depth: int
) -> float:
    """Calls per second with ``depth`` calls always in flight."""
    remaining = calls

    async def stream() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            await host.infer(key, {"x": x}, deadline=time.monotonic() + 30)

    started = time.perf_counter()
    await asyncio.gather(*(stream() for _ in range(depth)))
    return calls / (time.perf_counter() - started)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000, help="calls per mode and measure")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--rows", type=int, default=1)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--sandbox", choices=[m.value for m in SandboxMode], default=None)
    args = parser.parse_args()
    mode = SandboxMode(args.sandbox) if args.sandbox else None
    if mode is None:
        mode = SandboxMode.BUBBLEWRAP if isolation_available() else SandboxMode.UNISOLATED

    data = add_one().SerializeToString()
    blobs = Blobs(data)
    formats = FormatRegistry({"onnx": {"intra_op_threads": 1}})
    root = Path(tempfile.mkdtemp())
    counter = BatchCounter()
    ledger = CrashLedger(limit=3, window=60.0, clock=SystemClock())
    host = ModelHost(
        cache=ModelCache(root / "cache"),
        formats=formats,
        budget=MemoryBudget(host_bytes=None),
        batching=BatchingConfig(max_batch_size=64, max_queue_delay_us=0),
        observer=counter,
        process_executors=ProcessExecutors(
            formats.spec,
            ledger=ledger,
            start_timeout=60.0,
            launcher=SandboxLauncher(Sandbox(mode), scratch_root=root / "model-hosts"),
        ),
    )
    keys = {}
    for execution in ("thread", "process"):
        parsed, digest = manifest(data, execution)
        keys[execution] = VersionKey(f"bench/{execution}", "1", digest)
        host.load(keys[execution], parsed, blobs)
    executor = host._hosted[keys["process"]].executor
    assert isinstance(executor, ProcessExecutor)
    x = np.ones((args.rows, 4), np.float32)

    merged: dict[str, list[int]] = {"thread": [0, 0], "process": [0, 0]}  # calls, batches

    async def run() -> tuple[dict[str, list[float]], dict[str, list[float]]]:
        lat: dict[str, list[float]] = {"thread": [], "process": []}
        thr: dict[str, list[float]] = {"thread": [], "process": []}
        for key in keys.values():  # warm up
            await latency(host, key, x, min(200, args.calls))
        per_round = max(1, args.calls // args.rounds)
        for _ in range(args.rounds):
            for execution, key in keys.items():
                lat[execution] += await latency(host, key, x, per_round)
                before = counter.batches[key.model]
                thr[execution].append(await throughput(host, key, x, per_round, args.concurrency))
                merged[execution][0] += per_round
                merged[execution][1] += counter.batches[key.model] - before
        return lat, thr

    try:
        lat, thr = asyncio.run(run())
    finally:
        host.close()
    print(
        f"model host isolation: {mode.value} (worker {executor.name}), rows {args.rows}, "
        f"{args.calls} calls per mode and measure, concurrency {args.concurrency}"
    )
    print(f"{'mode':8} {'p50 µs':>9} {'p99 µs':>9} {'calls/s':>9} {'calls/batch':>12}")
    for execution in keys:
        rate = statistics.median(thr[execution])
        p50, p99 = pct(lat[execution], 0.5), pct(lat[execution], 0.99)
        calls, batches = merged[execution]
        per_batch = calls / max(1, batches)
        print(f"{execution:8} {p50:9.0f} {p99:9.0f} {rate:9.0f} {per_batch:12.1f}")
    p50 = pct(lat["process"], 0.5) / pct(lat["thread"], 0.5)
    rate = statistics.median(thr["process"]) / statistics.median(thr["thread"])
    print(f"process/thread: latency p50 x{p50:.2f}, throughput x{rate:.2f}")


if __name__ == "__main__":
    main()
