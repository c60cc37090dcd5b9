"""``ProcessExecutor``: the ``Executor`` contract, with the model in worker processes.

One worker process per instance (``BatchingConfig.instances``), each owned by one
thread of this executor that hands it one batch at a time. A batch past its deadline
(the latest deadline of its requests: until then someone still waits for it) kills
the worker, answers 504 ``execution_timeout`` and starts a fresh worker for the next
batch. A worker that dies while executing (a signal, ``os._exit``) answers 500
``execution_crashed`` (one that answers outside the protocol, a malformed or
out-of-bounds output layout, is killed and answers 500 ``invalid_worker_answer``), counts
a crash in the ``CrashLedger`` and is restarted, unless
that crash quarantines the version: then batches are refused with 503
``version_quarantined`` until the ledger lifts it, and the next batch after that
starts a worker. A Python exception in the model is the model's answer
(``execution_failed``, or its own ``ModelportError``); the worker goes on.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Protocol

import numpy as np

from modelport.errors import DeadlineExceeded, Internal
from modelport.logs import log_event
from modelport.manifest import Manifest
from modelport.runtime.batching.requests import merge, split
from modelport.runtime.executor import BatchOutcome, Done, Executor, Parts, stop_threads
from modelport.runtime.process.client import (
    Worker,
    WorkerGone,
    WorkerMisbehaved,
    WorkerOverdue,
    WorkerSpec,
)
from modelport.runtime.process.crashes import CrashLedger
from modelport.runtime.process.launching import WorkerLauncher
from modelport.runtime.types import BatchingConfig

log = logging.getLogger(__name__)


class WorkerObserver(Protocol):
    """Events of worker processes, by version (``owner/name``, version)."""

    def worker_crashed(self, model: str, version: str, reason: str) -> None:
        """A worker was lost: ``reason`` is ``crash``, or ``timeout`` (killed at a
        deadline; a timeout is not counted toward quarantine)."""
        ...

    def worker_started(self, model: str, version: str) -> None:
        """A worker process was started (the first one, or a restart)."""
        ...


class NullWorkerObserver:
    def worker_crashed(self, model: str, version: str, reason: str) -> None:
        pass

    def worker_started(self, model: str, version: str) -> None:
        pass


_Job = tuple[Parts, Done, float | None]


class ProcessExecutor:
    """Executes on ``instances`` worker processes; see the module docstring."""

    kills_overdue = True
    """A batch past its deadline is stopped (its worker killed), not left running."""

    def __init__(
        self,
        spec: WorkerSpec,
        *,
        instances: int,
        name: str,
        ledger: CrashLedger,
        start_timeout: float,
        observer: WorkerObserver | None = None,
        launcher: WorkerLauncher | None = None,
    ) -> None:
        self.instances = instances
        self.name = name
        self._spec = spec
        self._launcher = launcher
        self._ledger = ledger
        self._start_timeout = start_timeout
        self._observer = observer or NullWorkerObserver()
        self._model, _, self._version = name.rpartition(":")
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._closed = False
        self._workers: list[Worker | None] = []
        try:
            for _ in range(instances):  # loaded before the version is ready
                self._workers.append(self._start())
        except BaseException:
            for worker in self._workers:
                if worker is not None:
                    worker.kill()
            raise
        self._threads = [
            threading.Thread(target=self._work, args=(i,), name=f"proc-{name}-{i}", daemon=True)
            for i in range(instances)
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, parts: Parts, done: Done, deadline: float | None = None) -> None:
        if self._closed:
            raise RuntimeError("executor is closed")
        # Refused here, before the batch queues behind a worker that will not start.
        self._ledger.check(self.name)
        self._jobs.put((parts, done, deadline))

    def memory_bytes(self) -> int:
        """Resident memory of the workers now running."""
        return sum(w.memory_bytes() for w in self._workers if w is not None)

    @property
    def pids(self) -> list[int]:
        """Process ids of the running workers (for operators and tests)."""
        return [w.pid for w in self._workers if w is not None and w.pid is not None]

    def _start(self) -> Worker:
        worker = Worker(self._spec, name=self.name, launcher=self._launcher)
        worker.start(self._start_timeout)
        self._observer.worker_started(self._model, self._version)
        # Which isolation the publisher's files actually got, for the operator.
        log_event(
            log,
            "model.worker_started",
            model=self._model,
            version=self._version,
            pid=worker.pid,
            isolation=worker.isolation,
        )
        return worker

    def _work(self, slot: int) -> None:
        while (job := self._jobs.get()) is not None:
            parts, done, deadline = job
            try:
                outcome: BatchOutcome | BaseException = self._run(slot, parts, deadline)
            except Exception as exc:  # handed to every request of the batch
                outcome = exc
            done(outcome)
            idle = self._workers[slot] is None and not self._closed
            if idle and not self._ledger.quarantined_for(self.name):
                # Replaced now, not on the next call: that call need not wait for a load.
                try:
                    self._ensure(slot)
                except Exception as exc:  # the next batch tries again and reports it
                    log_event(
                        log,
                        "model.worker_restart_failed",
                        level=logging.WARNING,
                        model=self._model,
                        version=self._version,
                        cause=str(exc),
                    )

    def _ensure(self, slot: int) -> Worker:
        worker = self._workers[slot]
        if worker is None:
            self._ledger.check(self.name)
            worker = self._workers[slot] = self._start()
            log_event(log, "model.worker_restarted", model=self._model, version=self._version)
        return worker

    def _run(self, slot: int, parts: Parts, deadline: float | None) -> BatchOutcome:
        worker = self._ensure(slot)
        merged, sizes = merge(parts)
        try:
            outputs, seconds = worker.execute(merged, deadline)
        except WorkerOverdue:
            self._lost(slot, "timeout", "killed at its deadline")
            raise DeadlineExceeded(
                f"{self.name}: the execution passed its deadline and was stopped",
                code="execution_timeout",
            ) from None
        except WorkerGone as gone:
            quarantined = self._ledger.record(self.name)
            self._lost(slot, "crash", gone.how)
            what, code = "crashed", "execution_crashed"
            if isinstance(gone, WorkerMisbehaved):
                what, code = "answered outside the protocol and was killed", "invalid_worker_answer"
            raise Internal(
                f"{self.name}: the model's worker process {what} ({gone.how})"
                + ("; the version is quarantined" if quarantined else ""),
                code=code,
            ) from None
        return BatchOutcome(split(outputs, sizes), seconds, sum(sizes))

    def _lost(self, slot: int, reason: str, how: str) -> None:
        worker, self._workers[slot] = self._workers[slot], None
        if worker is not None:
            worker.kill()
        self._observer.worker_crashed(self._model, self._version, reason)
        log_event(
            log,
            "model.worker_lost",
            level=logging.WARNING,
            model=self._model,
            version=self._version,
            reason=reason,
            how=how,
            crashes=self._ledger.crashes(self.name),
        )

    def execute(self, inputs: dict[str, np.ndarray], timeout: float) -> dict[str, np.ndarray]:
        """Run one batch and wait for it (warm-up and examples); ``timeout`` seconds."""
        finished = threading.Event()
        result: list[BatchOutcome | BaseException] = []

        def done(outcome: BatchOutcome | BaseException) -> None:
            result.append(outcome)
            finished.set()

        self.submit([inputs], done, time.monotonic() + timeout)
        finished.wait()
        (outcome,) = result
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome.outputs[0]

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        stop_threads(self._jobs, self._threads)
        for worker in self._workers:
            if worker is not None:
                worker.stop()
        self._workers = [None] * len(self._workers)


class ProcessModel:
    """A ``LoadedModel`` over a ``ProcessExecutor``: the host warms up through it and
    frees the workers with ``unload``. What it returns is already conformed to the
    manifest's outputs (the worker does that)."""

    def __init__(self, executor: ProcessExecutor, *, timeout: float) -> None:
        self.executor = executor
        self._timeout = timeout

    def execute(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return self.executor.execute(inputs, self._timeout)

    def memory_bytes(self) -> int:
        return self.executor.memory_bytes()

    def unload(self) -> None:
        self.executor.close()


FormatSpec = Callable[[str], tuple[str, Mapping[str, object]]]
"""A format's plugin entry point value and its options, by format name."""


class ProcessExecutors:
    """Builds a version's ``ProcessExecutor`` (the host calls it for ``process`` versions);
    its workers are started by ``launcher`` (a clean exec without namespaces when None:
    ``runtime.process.launching``)."""

    def __init__(
        self,
        formats: FormatSpec,
        *,
        ledger: CrashLedger,
        start_timeout: float,
        observer: WorkerObserver | None = None,
        launcher: WorkerLauncher | None = None,
    ) -> None:
        self._formats = formats
        self.ledger = ledger
        self._start_timeout = start_timeout
        self._observer = observer
        self.launcher = launcher

    def __call__(
        self, manifest: Manifest, files: Mapping[str, Path], config: BatchingConfig, name: str
    ) -> tuple[Executor, ProcessModel]:
        """Start the version's workers (each loads the model); raises what a load raised."""
        entry, options = self._formats(manifest.format)
        spec = WorkerSpec(manifest.format, entry, options, dict(files), manifest)
        executor = ProcessExecutor(
            spec,
            instances=config.instances,
            name=name,
            ledger=self.ledger,
            start_timeout=self._start_timeout,
            observer=self._observer,
            launcher=self.launcher,
        )
        return executor, ProcessModel(executor, timeout=self._start_timeout)
