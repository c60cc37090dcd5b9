"""Executors run merged batches off the event loop.

The batcher only needs ``Executor``: hand it the requests of one batch and a
callback, and the callback is called once, from a worker, with the outputs or
the error. ``ThreadExecutor`` runs batches on its own threads in this process
(onnxruntime releases the GIL while it computes); an executor backed by a
worker process can implement the same contract, since everything crossing it
is plain arrays. A callback rather than a ``Future`` keeps the hand-off back to
the event loop to one ``call_soon_threadsafe``, which matters at small batches.
``runtime.process.executor.ProcessExecutor`` runs them in worker processes, which it
can kill at a batch's deadline (``kills_overdue``).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

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
    gpu_seconds: float = 0.0
    """Of that, the GPU's time, where the model measures it (``DeviceTimedModel``)."""


Parts = Sequence[Mapping[str, np.ndarray]]
Done = Callable[[BatchOutcome | BaseException], None]


class Executor(Protocol):
    """Runs batches for one loaded version.

    Call order: ``submit`` any number of times (at most ``instances`` batches
    execute at once; more wait their turn), then ``close`` once.
    """

    instances: int
    kills_overdue: bool
    """True when a batch still executing at its deadline is stopped (and answered with
    ``execution_timeout``); False when it runs on and its output is dropped."""

    def submit(self, parts: Parts, done: Done, deadline: float | None = None) -> None:
        """Merge ``parts`` along dimension 0, execute them as one batch, split the
        outputs, and call ``done`` exactly once, from a worker thread, with the
        ``BatchOutcome`` or the exception raised. ``deadline`` (``time.monotonic``) is
        when nobody waits for the batch any more. Raises if the executor is closed (or
        refuses the batch: a quarantined version)."""
        ...

    def close(self) -> None:
        """Finish what was submitted and stop the workers."""
        ...


def stop_threads(jobs: queue.SimpleQueue[Any], threads: list[threading.Thread]) -> None:
    """Stop an executor's worker threads: one ``None`` each on their queue, after the work
    already queued, then wait for them (but not for the calling thread, if it is one)."""
    for _ in threads:
        jobs.put(None)
    for thread in threads:
        if thread is not threading.current_thread():
            thread.join()


class ThreadExecutor:
    """Executes on ``instances`` dedicated threads in this process."""

    kills_overdue = False
    """A thread cannot be stopped: a batch past its deadline runs to its end."""

    def __init__(self, model: LoadedModel, *, instances: int = 1, name: str = "model") -> None:
        self.model = model
        self._timed = getattr(model, "execute_timed", None)  # a ``DeviceTimedModel``'s
        self.instances = instances
        self._jobs: queue.SimpleQueue[tuple[Parts, Done] | None] = queue.SimpleQueue()
        self._closed = False
        self._threads = [
            threading.Thread(target=self._work, name=f"exec-{name}-{i}", daemon=True)
            for i in range(instances)
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, parts: Parts, done: Done, deadline: float | None = None) -> None:
        if self._closed:
            raise RuntimeError("executor is closed")
        self._jobs.put((parts, done))

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            parts, done = job
            try:
                outcome: BatchOutcome | BaseException = self._run(parts)
            except Exception as exc:  # handed to every request of the batch
                outcome = exc
            done(outcome)

    def _run(self, parts: Parts) -> BatchOutcome:
        merged, sizes = merge(parts)
        started = time.perf_counter()
        if self._timed is None:
            outputs, gpu = self.model.execute(merged), 0.0
        else:
            outputs, gpu = self._timed(merged)
        elapsed = time.perf_counter() - started
        return BatchOutcome(split(outputs, sizes), elapsed, sum(sizes), gpu)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        stop_threads(self._jobs, self._threads)
