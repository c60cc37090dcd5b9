"""The cost of the process boundary per call: one version executed on a thread of this
process against the same version executed in a worker process, in one run.

    .venv/bin/python bench/process_exec_bench.py              # 2000 calls per size
    .venv/bin/python bench/process_exec_bench.py --calls 5000 --rows 1,64,4096,65536

Two versions of one real ONNX model (add-one, ``x [-1, 4] FP32``) on one ``ModelHost``:
``runtime.execution`` ``thread`` and ``process``. Calls go through ``host.infer`` (the
batcher, the executor, and for the process version the shared-memory hand-off and the
control messages), one after the other on one event loop, so each call's latency is
the whole cost of one execution with nothing queued. For each input size (rows of 4
floats) it prints the median and p99 microseconds per call of both and their ratio,
and the median difference: what crossing to the worker and back adds per call.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from modelport.clock import SystemClock
from modelport.digests import sha256_digest
from modelport.manifest import Manifest, manifest_digest
from modelport.runtime.admission import MemoryBudget
from modelport.runtime.cache import ModelCache
from modelport.runtime.formats import FormatRegistry
from modelport.runtime.host import ModelHost
from modelport.runtime.process.crashes import CrashLedger
from modelport.runtime.process.executor import ProcessExecutors
from modelport.runtime.types import BatchingConfig, VersionKey
from modelport.testing.onnx_models import add_one


class Blobs:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def size(self, digest: str) -> int | None:
        return len(self.data)

    def read(self, digest: str, start: int = 0, end: int | None = None):  # type: ignore[no-untyped-def]
        yield self.data[start:end]


def manifest(data: bytes, execution: str) -> tuple[Manifest, str]:
    raw = {
        "format": "onnx",
        "files": [{"path": "model.onnx", "digest": sha256_digest(data), "size": len(data)}],
        "inputs": [{"name": "x", "datatype": "FP32", "shape": [-1, 4]}],
        "outputs": [{"name": "y", "datatype": "FP32", "shape": [-1, 4]}],
        "license": "MIT",
        "runtime": {"execution": execution},
        "resources": {"max_batch_size": 64},
    }
    parsed = Manifest.model_validate(raw)
    return parsed, manifest_digest(parsed)


async def per_call(host: ModelHost, key: VersionKey, x: np.ndarray, calls: int) -> list[float]:
    for _ in range(min(200, calls)):  # warm up
        await host.infer(key, {"x": x}, deadline=time.monotonic() + 30)
    seconds = []
    for _ in range(calls):
        started = time.perf_counter()
        await host.infer(key, {"x": x}, deadline=time.monotonic() + 30)
        seconds.append(time.perf_counter() - started)
    return seconds


def p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rows", default="1,64,4096,65536")
    parser.add_argument("--threads", type=int, default=1, help="onnxruntime intra-op threads")
    args = parser.parse_args()
    data = add_one().SerializeToString()
    source = Blobs(data)
    with tempfile.TemporaryDirectory() as home:
        formats = FormatRegistry({"onnx": {"intra_op_threads": args.threads}})
        ledger = CrashLedger(limit=3, window=60.0, clock=SystemClock())
        host = ModelHost(
            cache=ModelCache(Path(home) / "cache"),
            formats=formats,
            budget=MemoryBudget(host_bytes=None),
            batching=BatchingConfig(max_batch_size=1),
            process_executors=ProcessExecutors(formats.spec, ledger=ledger, start_timeout=60),
        )
        keys = {}
        for execution in ("thread", "process"):
            parsed, digest = manifest(data, execution)
            keys[execution] = VersionKey("bench/add-one", execution, digest)
            host.load(keys[execution], parsed, source)
        print(
            f"{'rows':>6} {'bytes':>8} | {'thread p50':>10} {'p99':>8} | "
            f"{'process p50':>11} {'p99':>8} | {'ratio':>5} {'added p50':>9}  (µs per call)"
        )
        try:
            for rows in (int(r) for r in args.rows.split(",")):
                x = np.random.default_rng(0).standard_normal((rows, 4)).astype(np.float32)
                calls = max(50, args.calls if rows <= 4096 else args.calls // 10)
                # Interleaved rounds, so drift in a shared machine's load hits both alike.
                thread: list[float] = []
                process: list[float] = []
                for _ in range(4):
                    thread += asyncio.run(per_call(host, keys["thread"], x, calls // 4))
                    process += asyncio.run(per_call(host, keys["process"], x, calls // 4))
                t50, p50 = statistics.median(thread) * 1e6, statistics.median(process) * 1e6
                print(
                    f"{rows:>6} {x.nbytes:>8} | {t50:>10.1f} {p(thread, 0.99):>8.1f} | "
                    f"{p50:>11.1f} {p(process, 0.99):>8.1f} | {p50 / t50:>5.2f} "
                    f"{p50 - t50:>9.1f}"
                )
        finally:
            host.close()


if __name__ == "__main__":
    main()
