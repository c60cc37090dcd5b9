"""The runtime's own cost per request: the batcher, executor hand-off and metrics
around a model that does nothing, measured as event-loop CPU per request.

    .venv/bin/python bench/runtime_overhead.py
"""

from __future__ import annotations

import asyncio
import time

import numpy as np
import uvloop

from modelport.observability.metrics import RuntimeMetrics
from modelport.runtime.batching.batcher import Batcher
from modelport.runtime.executor import ThreadExecutor
from modelport.runtime.observer import NullObserver, VersionObserver
from modelport.runtime.types import BatchingConfig


class NoOpModel:
    def execute(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {"y": inputs["x"]}

    def memory_bytes(self) -> int:
        return 0

    def unload(self) -> None:
        pass


async def measure(
    observer: VersionObserver, concurrency: int, seconds: float
) -> tuple[float, float]:
    """(requests per second, loop CPU microseconds per request)."""
    executor = ThreadExecutor(NoOpModel())
    batcher = Batcher(executor, BatchingConfig(max_batch_size=64), observer)
    row = {"x": np.zeros((1, 64), np.float32)}
    done = 0
    stop = time.perf_counter() + seconds

    async def caller() -> None:
        nonlocal done
        while time.perf_counter() < stop:
            await batcher.submit(row, deadline=time.monotonic() + 10)
            done += 1

    cpu, wall = time.thread_time(), time.perf_counter()
    await asyncio.gather(*(caller() for _ in range(concurrency)))
    cpu, wall = time.thread_time() - cpu, time.perf_counter() - wall
    await batcher.drain()
    executor.close()
    return done / wall, cpu / done * 1e6


async def main() -> None:
    print("| observer | concurrency | req/s | loop CPU µs/request |")
    print("|---|---:|---:|---:|")
    for name, observer in (
        ("none", NullObserver().version("o/m", "1")),
        ("prometheus", RuntimeMetrics().version("o/m", "1")),
    ):
        for concurrency in (1, 64):
            rate, cpu = await measure(observer, concurrency, 2.0)
            print(f"| {name} | {concurrency} | {rate:.0f} | {cpu:.1f} |")


if __name__ == "__main__":
    uvloop.run(main())
