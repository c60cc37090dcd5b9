"""Executors run merged batches off the event loop.

The batcher only needs ``Executor``: hand it the requests of one batch, get a
``concurrent.futures.Future`` of their outputs. ``ThreadExecutor`` runs them on a
small thread pool in this process (onnxruntime releases the GIL while it
computes); an executor backed by a worker process can implement the same
contract, since everything crossing it is plain arrays.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from modelport.runtime.batching.requests import Tensors, merge, split
from modelport.runtime.formats.base import LoadedModel


@dataclass(frozen=True)
class BatchOutcome:
    outputs: list[Tensors]
    """One dict of outputs per request, in the order given."""
    execute_seconds: float
    """Time spent in the model itself (not merging or splitting)."""
    rows: int


class Executor(Protocol):
    """Runs batches for one loaded version.

    Call order: ``submit`` any number of times, concurrently (at most ``instances``
    batches execute at once; more wait), then ``close`` once.
    """

    instances: int

    def submit(self, parts: Sequence[Mapping[str, np.ndarray]]) -> Future[BatchOutcome]:
        """Merge ``parts`` along dimension 0, execute them as one batch, split the outputs."""
        ...

    def close(self) -> None:
        """Finish what was submitted and release the workers."""
        ...


class ThreadExecutor:
    """Executes on ``instances`` worker threads in this process."""

    def __init__(self, model: LoadedModel, *, instances: int = 1, name: str = "model") -> None:
        self.model = model
        self.instances = instances
        self._pool = ThreadPoolExecutor(max_workers=instances, thread_name_prefix=f"exec-{name}")

    def submit(self, parts: Sequence[Mapping[str, np.ndarray]]) -> Future[BatchOutcome]:
        return self._pool.submit(self._run, list(parts))

    def _run(self, parts: list[Mapping[str, np.ndarray]]) -> BatchOutcome:
        merged, sizes = merge(parts)
        started = time.perf_counter()
        outputs = self.model.execute(merged)
        elapsed = time.perf_counter() - started
        return BatchOutcome(split(outputs, sizes), elapsed, sum(sizes))

    def close(self) -> None:
        self._pool.shutdown(wait=True)
