"""Publishers' pre- and post-processing around a version's model, in warm sandboxed
workers (``modelport.sandbox.warm``).

``ProcessingPools`` (one per process, built by ``modelport.app``) gives each version
with a manifest ``processing`` section its ``VersionProcessing``: on first use the
package's ``.py`` files and ``processing.data`` files are copied, verified against their
digests, to a folder of this process's own under ``HOME/processing`` (its ``files/`` is
the workers' read-only view; removed at close), and a ``WarmPool`` of at most
``concurrency`` workers is made. Calls wait on their worker in the process's
``processing`` thread pool (``threads``, shared by every version), not the event
loop's. Workers start on demand (the first call pays the start, up to
``start_timeout_seconds``) and stay until the process ends, one fails, or the reaper
(a ``BackgroundLoop``, every ``reap_interval_seconds``) stops it: idle for
``idle_seconds`` (on the injectable clock), or using more than ``idle_cpu_seconds`` of
CPU while serving no call (killed; logged as ``processing.worker_reaped`` and counted);
the next call starts a fresh one.

``VersionProcessing.run(stage, tensors, deadline)`` sends the tensors to a worker and
checks what the code returned against the tensors the next step expects (the model's
inputs after ``preprocess``, the caller's outputs after ``postprocess``): a missing
tensor, or one that cannot be cast to its declared datatype, is 500
``processing_failed``, as is the code raising or its worker dying; no answer by the
call's deadline (the smaller of the request's and ``timeout_seconds``) is 504
``processing_timeout``. Either way the worker is replaced. Each call is counted and
timed (``ProcessingMetrics``). Where the sandbox mode cannot be met on this machine,
nothing runs: 503 ``sandbox_unavailable``.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Executor
from pathlib import Path
from typing import IO

import numpy as np
import orjson

from modelport.background.loops import BackgroundLoop
from modelport.background.pools import ThreadPools
from modelport.blobs import BlobStore
from modelport.blobs.verify import copy_verified
from modelport.clock import Clock, SystemClock
from modelport.errors import ModelportError
from modelport.logs import log_event
from modelport.manifest import Manifest, TensorSpec
from modelport.observability.processing_metrics import ProcessingMetrics
from modelport.runtime.conform import conform
from modelport.sandbox import Limits, Sandbox
from modelport.sandbox.warm import ProcessingFailed, WarmPool, WarmWorker
from modelport.serving.types import VersionRef

log = logging.getLogger(__name__)
WORKER_MODULE = "modelport.sandbox.processing_worker"
STAGES = ("preprocess", "postprocess")


class VersionProcessing:
    """One version's processing: its pool of warm workers and the tensors each stage
    must return."""

    def __init__(
        self,
        version: VersionRef,
        pool: WarmPool,
        *,
        timeout_seconds: float,
        executor: Executor,
        metrics: ProcessingMetrics | None = None,
        folder: Path | None = None,
    ) -> None:
        processing = version.manifest.processing
        assert processing is not None
        self.version = version
        self.pool = pool
        self.timeout_seconds = timeout_seconds
        self.executor = executor
        self.metrics = metrics
        self.folder = folder
        """The workers' folder, removed with them."""
        model = version.manifest.for_runtime()
        self.expected: dict[str, Sequence[TensorSpec]] = {
            "preprocess": model.inputs,
            "postprocess": version.manifest.outputs,
        }
        self.entries = {"preprocess": processing.preprocess, "postprocess": processing.postprocess}

    def has(self, stage: str) -> bool:
        return self.entries.get(stage) is not None

    async def run(
        self, stage: str, tensors: Mapping[str, np.ndarray], deadline: float
    ) -> tuple[dict[str, np.ndarray], float]:
        """The stage's tensors and its seconds; raises as the module's docstring says."""
        started = time.monotonic()
        outcome = "ok"
        try:
            due = min(deadline, started + self.timeout_seconds)
            loop = asyncio.get_running_loop()
            _, answer = await loop.run_in_executor(
                self.executor, self.pool.call, {"stage": stage}, tensors, due
            )
            return conform(stage, answer, self.expected[stage]), time.monotonic() - started
        except ModelportError as exc:
            outcome = exc.code
            exc.extra.setdefault("stage", stage)
            exc.extra["scope"] = "version"  # the version's code failed, not the backend
            raise
        finally:
            if self.metrics is not None:
                self.metrics.call(
                    self.version.model,
                    self.version.version,
                    stage,
                    outcome,
                    time.monotonic() - started,
                )

    def close(self) -> None:
        self.pool.close()
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)


class ProcessingPools:
    """Every version's ``VersionProcessing`` in this process; see the module docstring."""

    def __init__(
        self,
        sandbox: Sandbox,
        blobs: BlobStore,
        *,
        work_dir: Path,
        concurrency: int,
        timeout_seconds: float,
        start_timeout_seconds: float,
        memory_bytes: int,
        threads: int = 64,
        metrics: ProcessingMetrics | None = None,
        idle_seconds: float | None = None,
        idle_cpu_seconds: float | None = None,
        reap_interval_seconds: float | None = None,
        clock: Clock | None = None,
        pools: ThreadPools | None = None,
    ) -> None:
        self.sandbox = sandbox
        self.blobs = blobs
        self.work_dir = work_dir
        self.concurrency = concurrency
        self.timeout_seconds = timeout_seconds
        self.start_timeout_seconds = start_timeout_seconds
        self.memory_bytes = memory_bytes
        self.metrics = metrics
        self.idle_seconds = idle_seconds
        self.idle_cpu_seconds = idle_cpu_seconds
        self.clock: Clock = clock if clock is not None else SystemClock()
        self._versions: dict[str, VersionProcessing] = {}
        # Calls wait on their worker (or a free one) in the process's "processing" pool
        # (a private one, closed with these pools, when none is handed in), never in the
        # event loop's default executor, which the database calls share: a hung code
        # stalls only its own callers. Not drained at close: a call may be stuck on a
        # hung worker.
        self._own_pools = ThreadPools() if pools is None else None
        pools = pools or self._own_pools
        assert pools is not None
        self._executor = pools.get("processing", threads, drain=False)
        self._lock = threading.Lock()
        self._closed = False
        # The reaper's cadence is real time (the idleness it judges reads ``clock``): a
        # test advancing the clock reaps only when it asks to.
        self._reaper: BackgroundLoop | None = None
        if reap_interval_seconds is not None:
            self._reaper = BackgroundLoop(
                "processing-reaper",
                self.reap,
                reap_interval_seconds,
                first_after=reap_interval_seconds,
                failure="reaping the processing workers failed",
            )
            self._reaper.start()

    def reap(self) -> list[str]:
        """Reap every version's idle workers now (``WarmPool.reap``); why, for each."""
        with self._lock:
            versions = list(self._versions.values())
        return [reason for processing in versions for reason in processing.pool.reap()]

    def _reaped(self, version: VersionRef, reason: str, cpu_seconds: float) -> None:
        log_event(
            log,
            "processing.worker_reaped",
            level=logging.WARNING if reason == "idle_cpu" else logging.INFO,
            model=version.model,
            version=version.version,
            reason=reason,
            idle_cpu_seconds=round(cpu_seconds, 3),
        )
        if self.metrics is not None:
            self.metrics.worker_reaped(version.model, version.version, reason)

    async def get(self, version: VersionRef) -> VersionProcessing | None:
        """The version's processing (made on first use, in a thread), or None without."""
        if version.manifest.processing is None:
            return None
        known = self._versions.get(version.manifest_digest)
        if known is not None:
            return known
        return await asyncio.to_thread(self._make, version)

    def _make(self, version: VersionRef) -> VersionProcessing:
        with self._lock:
            known = self._versions.get(version.manifest_digest)
            if known is not None:
                return known
            if self._closed:
                raise ProcessingFailed("the processing pools are closed")
            self.sandbox.confinement()  # fail closed (503) before copying anything
            # A folder of this process's own: several serving processes share the home.
            self.work_dir.mkdir(parents=True, exist_ok=True)
            name = version.manifest_digest.removeprefix("sha256:")[:16]
            folder = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=self.work_dir))
            try:
                _materialize(self.blobs, version.manifest, folder)
            except BaseException:
                shutil.rmtree(folder, ignore_errors=True)
                raise
            limits = self.sandbox.limits(
                wall_seconds=0,  # a warm worker lives on; each call has its deadline
                cpu_seconds=0,
                memory_bytes=self.memory_bytes,
            )
            pool = WarmPool(
                lambda deadline: self._start(version, folder, limits, deadline),
                size=self.concurrency,
                start_timeout=self.start_timeout_seconds,
                idle_seconds=self.idle_seconds,
                idle_cpu_seconds=self.idle_cpu_seconds,
                clock=self.clock,
                on_reap=lambda reason, used: self._reaped(version, reason, used),
            )
            made = VersionProcessing(
                version,
                pool,
                timeout_seconds=self.timeout_seconds,
                executor=self._executor,
                metrics=self.metrics,
                folder=folder,
            )
            self._versions[version.manifest_digest] = made
            return made

    def _start(
        self, version: VersionRef, folder: Path, limits: Limits, deadline: float
    ) -> WarmWorker:
        log = folder / "worker.log"
        stderr: IO[bytes]
        with log.open("ab") as stderr:
            started = self.sandbox.start(
                [WORKER_MODULE, "."],
                scratch=folder,
                readonly=[folder / "files"],
                limits=limits,
                stderr=stderr,
            )
        if self.metrics is not None:
            self.metrics.worker_started(version.model, version.version)
        # An answer cannot be larger than what the worker could hold.
        worker = WarmWorker(started, stderr=log, max_answer_bytes=self.memory_bytes)
        worker.wait_ready(deadline)
        return worker

    def close(self) -> None:
        """Stop every worker (the process is ending)."""
        if self._reaper is not None:
            self._reaper.stop()
        with self._lock:
            self._closed = True
            versions, self._versions = list(self._versions.values()), {}
        for processing in versions:
            processing.close()
        if self._own_pools is not None:
            self._own_pools.close()


def _materialize(blobs: BlobStore, manifest: Manifest, folder: Path) -> None:
    """Copy the code and data files the processing needs, verified, to ``folder/files``,
    and name its entry points in ``folder/processing.json``."""
    processing = manifest.processing
    assert processing is not None
    files = folder / "files"
    files.mkdir(parents=True)
    wanted = set(processing.data)
    for entry in manifest.files:
        if entry.path.endswith(".py") or entry.path in wanted:
            copy_verified(blobs, entry.digest, files / entry.path)
    entries = {"preprocess": processing.preprocess, "postprocess": processing.postprocess}
    (folder / "processing.json").write_bytes(orjson.dumps(entries))
