"""The model host: many versions in one process, each loaded, batched and executed.

State. Every hosted version is one ``_Hosted`` record in one dict, keyed by its
``VersionKey``, with an explicit ``LoadState``. A version not in the dict is not
loaded. A ``failed`` record stays, with its cause, until the version is loaded
again or unloaded.

Loading. ``start_load`` decides admission under the lock first (memory estimate
from the manifest, evicting idle versions if needed, or refusing with
``insufficient_memory`` before anything is fetched or allocated). Then a worker
thread runs the phases fetch → verify → load → warm-up, timing each. Warm-up
runs the manifest's first example; the version is ready only when its outputs
match within tolerance (no example: ready after load, and the status says so).
A load still running after ``load_timeout`` is abandoned: the record turns
``failed`` ("load timed out"), its memory stays reserved until the thread
really ends, and whatever it loads then is dropped. A load that raises fails
its record and nothing else.

Execution. A version's manifest chooses (``runtime.execution``): ``thread`` (the
manifest's default) loads the model here and executes it on the executor's threads;
``process`` has ``process_executors`` start worker processes that load it, and the host
warms up and serves through them (``runtime.process``). A host built with ``execution``
runs every version so, whatever its manifest says: the app builds its host with
``Execution.PROCESS`` unless the operator's ``runtime_execution`` is ``manifest``. The
host's memory accounting then measures the workers' resident memory.

Serving. ``infer`` hands a request to the version's ``Batcher`` on the running
event loop (one per loop, created on first use) and counts it in flight, so
eviction never takes a busy version.

Threading. ``load``/``unload`` block and must not be called on an event loop
thread (use ``asyncio.to_thread``); ``infer`` and ``ensure_loaded`` are
coroutines. The lock guards the dict and every record's fields.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import psutil
from opentelemetry.trace import Tracer

from modelport.clock import Clock, SystemClock
from modelport.errors import Conflict, ModelportError, NotFound, Unavailable, Unprocessable
from modelport.logs import log_event
from modelport.manifest import Manifest
from modelport.runtime.admission import (
    MemoryBudget,
    Resident,
    decayed_uses,
    plan_admission,
)
from modelport.runtime.batching.batcher import Batcher
from modelport.runtime.cache import BlobSource, ModelCache
from modelport.runtime.examples import run_example
from modelport.runtime.executor import Executor, ThreadExecutor
from modelport.runtime.formats.base import LoadedModel, ModelFormat
from modelport.runtime.observer import NullObserver, RuntimeObserver, VersionObserver
from modelport.runtime.outputs import DeclaredOutputs
from modelport.runtime.process.crashes import CrashLedger
from modelport.runtime.types import (
    BatchingConfig,
    Execution,
    InferenceResult,
    LoadState,
    Phase,
    Priority,
    VersionKey,
    VersionStatus,
)

log = logging.getLogger(__name__)

ExecutorFactory = Callable[[LoadedModel, BatchingConfig, str], Executor]
ProcessExecutorFactory = Callable[
    [Manifest, Mapping[str, Path], BatchingConfig, str], tuple[Executor, LoadedModel]
]
"""Starts a ``process`` version's workers from its manifest and local files: the
executor that serves it and the model the host warms up through (``unload`` stops the
workers). ``runtime.process.executor.ProcessExecutors`` is the one."""
LoadCheck = Callable[[VersionKey, Manifest], None]
"""Called in the loading thread before a version's files are fetched; what it raises
fails the load (the platform checks the version's signatures so)."""


def thread_executor(model: LoadedModel, config: BatchingConfig, name: str) -> Executor:
    return ThreadExecutor(model, instances=config.instances, name=name)


def process_rss() -> int:
    return int(psutil.Process().memory_info().rss)


@dataclass(eq=False)
class _Hosted:
    """One hosted version; every field is guarded by the host's lock."""

    key: VersionKey
    manifest: Manifest
    state: LoadState
    pinned: bool
    generation: int
    observer: VersionObserver
    batching: BatchingConfig
    done: Future[VersionStatus] = field(default_factory=Future)
    cause: str | None = None
    cause_code: str | None = None
    phases: dict[str, float] = field(default_factory=dict)
    host_bytes: int = 0
    device_bytes: int = 0
    memory_source: str = "estimated"
    warm_up: str = ""
    model: LoadedModel | None = None
    executor: Executor | None = None
    batchers: dict[asyncio.AbstractEventLoop, Batcher] = field(default_factory=dict)
    in_flight: int = 0
    uses: float = 0.0
    last_used: float = 0.0
    reload_seconds: float = 0.0
    execute_estimate: float = 0.0


class ModelHost:
    """Hosts model versions in this process. See the module docstring for the contract."""

    def __init__(
        self,
        *,
        cache: ModelCache,
        formats: Callable[[str], ModelFormat],
        budget: MemoryBudget,
        batching: BatchingConfig = BatchingConfig(),
        load_timeout: float = 300.0,
        observer: RuntimeObserver | None = None,
        executor_factory: ExecutorFactory = thread_executor,
        memory_probe: Callable[[], int] = process_rss,
        check_load: LoadCheck | None = None,
        process_executors: ProcessExecutorFactory | None = None,
        crash_ledger: CrashLedger | None = None,
        execution: Execution | None = None,
        tracer: Tracer | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.cache = cache
        self.clock = clock or SystemClock()
        """What calls' deadlines (``infer``) are on: handed to every batcher."""
        self.tracer = tracer
        """Handed to every batcher: the waits and batches of traced calls (None: off)."""
        self._process_executors = process_executors
        self.execution = execution
        """Where every version executes, whatever its manifest says; None: as it says."""
        # The ledger ``process_executors`` counts crashes in, by version ref: statuses
        # report crashes and quarantine from it.
        self._crash_ledger = crash_ledger
        self._check_load = check_load
        self.formats = formats
        self.budget = budget
        self.batching = batching
        self.load_timeout = load_timeout
        self.observer: RuntimeObserver = observer or NullObserver()
        self._executor_factory = executor_factory
        self._memory_probe = memory_probe
        self._lock = threading.RLock()
        self._hosted: dict[VersionKey, _Hosted] = {}
        self._by_ref: dict[str, VersionKey] = {}
        self._abandoned: dict[int, tuple[int, int]] = {}
        self._generation = 0

    # ---- queries
    def find(self, model: str, version: str) -> VersionKey | None:
        """The key under which ``model:version`` is hosted, whatever its state."""
        return self._by_ref.get(f"{model}:{version}")

    def status(self, key: VersionKey) -> VersionStatus | None:
        with self._lock:
            hosted = self._hosted.get(key)
            return None if hosted is None else self._status(hosted)

    def predicted_wait(self, key: VersionKey) -> float | None:
        """Seconds a new ``batch`` request of ``key`` would wait in its longest queue
        (every event loop's batcher); None where it is not hosted here."""
        with self._lock:
            hosted = self._hosted.get(key)
            batchers = [] if hosted is None else list(hosted.batchers.values())
        if hosted is None:
            return None
        return max((b.predicted_wait(Priority.BATCH) for b in batchers), default=0.0)

    def statuses(self) -> list[VersionStatus]:
        with self._lock:
            return [self._status(h) for h in self._hosted.values()]

    def is_ready(self, key: VersionKey) -> bool:
        hosted = self._hosted.get(key)
        return hosted is not None and hosted.state is LoadState.READY

    # ---- loading
    def start_load(
        self, key: VersionKey, manifest: Manifest, source: BlobSource, *, pinned: bool = False
    ) -> Future[VersionStatus]:
        """Begin loading (or join a load in progress); the future fails with the cause.

        Raises at once, recording nothing, when memory admission refuses the load.
        A manifest with publisher processing is loaded, batched and warmed up as its
        model sees it (``Manifest.for_runtime``): the processing runs outside the
        runtime. Its signatures and files are checked on the manifest as published.
        """
        with self._lock:
            other = self._by_ref.get(key.ref)
            if other is not None and other != key:
                raise Conflict(
                    f"{key.ref} is hosted with manifest {other.manifest_digest}, "
                    f"not {key.manifest_digest}",
                    code="version_digest_mismatch",
                )
            hosted = self._hosted.get(key)
            if hosted is not None:
                hosted.pinned = hosted.pinned or pinned
                if hosted.state in (LoadState.READY, LoadState.LOADING):
                    return hosted.done
                if hosted.state is LoadState.UNLOADING:
                    raise Unavailable(
                        f"{key.ref} is being unloaded", code="model_unloading", retry_after=1
                    )
            observer = self.observer.version(key.model, key.version)
            try:
                fmt = self.formats(manifest.format)
            except ModelportError as exc:
                # The manifest is immutable: this version will never load; say why in status.
                failed = self._record(key, manifest, pinned, observer)
                self._fail(failed, exc)
                return failed.done
            host_needed = manifest.resources.host_memory_bytes or fmt.estimate_memory(manifest)
            device_needed = manifest.resources.device_memory_bytes or 0
            victims = self._admit(key, host_needed, device_needed)
            hosted = self._record(key, manifest, pinned, observer)
            hosted.host_bytes, hosted.device_bytes = host_needed, device_needed
            generation = hosted.generation
            teardown = [self._detach(self._hosted[v]) for v in victims]
        log_event(
            log,
            "model.load_started",
            model=key.model,
            version=key.version,
            pinned=pinned,
            host_bytes=host_needed,
            evicting=",".join(v.ref for v in victims),
        )
        worker = threading.Thread(
            # In the caller's context: the load's records carry its request id.
            target=contextvars.copy_context().run,
            args=(self._load, hosted, generation, fmt, source, teardown),
            name=f"load-{key.ref}",
            daemon=True,  # a hung load must not keep the process alive
        )
        timer = threading.Timer(self.load_timeout, self._time_out, args=(hosted, generation))
        timer.daemon = True
        hosted.done.add_done_callback(lambda _: timer.cancel())
        worker.start()
        timer.start()
        return hosted.done

    def load(
        self, key: VersionKey, manifest: Manifest, source: BlobSource, *, pinned: bool = False
    ) -> VersionStatus:
        """Load and wait; raises the cause of a failed load."""
        return self.start_load(key, manifest, source, pinned=pinned).result()

    async def ensure_loaded(
        self, key: VersionKey, manifest: Manifest, source: BlobSource
    ) -> VersionStatus:
        """Ready the version for a request: join or start its load (a cold start).

        A version whose load failed stays failed here (``Unavailable`` with its
        cause); only an explicit ``load`` retries it.
        """
        hosted = self._hosted.get(key)
        if hosted is not None and hosted.state is LoadState.READY:
            return self._status(hosted)
        if hosted is not None and hosted.state is LoadState.FAILED:
            raise self._unavailable(hosted)
        if hosted is None:
            self.observer.version(key.model, key.version).cold_start()
        done = self.start_load(key, manifest, source)
        # Shielded: a caller that goes away must not cancel the load others wait for.
        return await asyncio.shield(asyncio.wrap_future(done))

    def _record(
        self, key: VersionKey, manifest: Manifest, pinned: bool, observer: VersionObserver
    ) -> _Hosted:
        self._generation += 1
        hosted = _Hosted(
            key=key,
            manifest=manifest,
            state=LoadState.LOADING,
            pinned=pinned,
            generation=self._generation,
            observer=observer,
            batching=self._batching_for(manifest.for_runtime()),
        )
        self._hosted[key] = hosted
        self._by_ref[key.ref] = key
        return hosted

    def _admit(self, key: VersionKey, host_needed: int, device_needed: int) -> list[VersionKey]:
        now = time.monotonic()
        residents = [
            Resident(
                key=h.key,
                host_bytes=h.host_bytes,
                device_bytes=h.device_bytes,
                evictable=h.state is LoadState.READY and not h.pinned and h.in_flight == 0,
                recent_uses=decayed_uses(h.uses, h.last_used, now),
                reload_seconds=h.reload_seconds,
            )
            for h in self._hosted.values()
            if h.key != key and h.state in (LoadState.READY, LoadState.LOADING)
        ]
        reserved_host = sum(b[0] for b in self._abandoned.values())
        reserved_device = sum(b[1] for b in self._abandoned.values())
        plan = plan_admission(
            host_needed,
            device_needed,
            residents,
            self.budget,
            reserved_host=reserved_host,
            reserved_device=reserved_device,
        )
        return list(plan.evict)

    def _load(
        self,
        hosted: _Hosted,
        generation: int,
        fmt: ModelFormat,
        source: BlobSource,
        teardown: list[_Hosted],
    ) -> None:
        key, manifest = hosted.key, hosted.manifest
        model: LoadedModel | None = None
        kept = False
        phases: dict[Phase, float] = {}
        try:
            for victim in teardown:
                self._release(victim)
            if self._check_load is not None:
                self._check_load(key, manifest)
            cached = self.cache.materialize(manifest, key.manifest_digest, source)
            phases[Phase.FETCH] = cached.fetch_seconds
            phases[Phase.VERIFY] = cached.verify_seconds
            before = self._memory_probe()
            started = time.perf_counter()
            runtime = manifest.for_runtime()
            executor: Executor | None = None
            if (self.execution or execution_of(manifest)) is Execution.PROCESS:
                executor, model = self._start_workers(hosted, runtime, cached.files)
            else:
                # What leaves the host is what the manifest declares (runtime.outputs).
                model = DeclaredOutputs(fmt.load(cached.files, runtime), runtime.outputs)
            phases[Phase.LOAD] = time.perf_counter() - started
            measured = (
                model.memory_bytes()
                if executor is not None
                else max(0, self._memory_probe() - before)
            )
            started = time.perf_counter()
            warm_up = _warm_up(model, runtime)
            phases[Phase.WARMUP] = time.perf_counter() - started
            with self._lock:
                if hosted.generation == generation and hosted.state is LoadState.LOADING:
                    self._ready(hosted, model, phases, measured, warm_up, executor)
                    kept = True
        except BaseException as exc:  # any failure fails this version only
            with self._lock:
                if hosted.generation == generation and hosted.state is LoadState.LOADING:
                    hosted.phases = {str(p): s for p, s in phases.items()}
                    self._fail(hosted, exc)
        finally:
            with self._lock:
                self._abandoned.pop(generation, None)
            if model is not None and not kept:
                with contextlib.suppress(Exception):
                    model.unload()
        if kept:
            log_event(
                log,
                "model.loaded",
                model=key.model,
                version=key.version,
                phases=",".join(f"{p}={s:.4f}s" for p, s in phases.items()),
                host_bytes=hosted.host_bytes,
                memory_source=hosted.memory_source,
            )
            for phase, seconds in phases.items():
                hosted.observer.load_phase(str(phase), seconds)
            hosted.observer.memory(hosted.host_bytes, hosted.device_bytes)
            hosted.done.set_result(self._status(hosted))

    def _start_workers(
        self, hosted: _Hosted, runtime: Manifest, files: Mapping[str, Path]
    ) -> tuple[Executor, LoadedModel]:
        if self._process_executors is None:
            raise Unavailable(
                f"{hosted.key.ref} asks for process execution, which this host does not offer",
                code="execution_mode_unavailable",
            )
        return self._process_executors(runtime, files, hosted.batching, hosted.key.ref)

    def _ready(
        self,
        hosted: _Hosted,
        model: LoadedModel,
        phases: dict[Phase, float],
        measured: int,
        warm_up: tuple[str, float],
        executor: Executor | None = None,
    ) -> None:
        manifest = hosted.manifest
        declared = manifest.resources.host_memory_bytes or 0
        file_bytes = sum(f.size for f in manifest.files)
        # RSS deltas undercount when the allocator reuses freed memory; never go below
        # what the publisher declared or the weights themselves.
        hosted.host_bytes, hosted.memory_source = max(
            (measured, "measured"), (declared, "declared"), (file_bytes, "files")
        )
        hosted.model = model
        hosted.executor = executor or self._executor_factory(model, hosted.batching, hosted.key.ref)
        hosted.phases = {str(p): s for p, s in phases.items()}
        hosted.reload_seconds = sum(phases.values())
        hosted.warm_up, hosted.execute_estimate = warm_up
        hosted.last_used = time.monotonic()
        hosted.state = LoadState.READY

    def _fail(self, hosted: _Hosted, exc: BaseException) -> None:
        hosted.state = LoadState.FAILED
        if isinstance(exc, ModelportError):
            hosted.cause, hosted.cause_code = exc.message, exc.code
            error: ModelportError = exc
        else:
            hosted.cause = f"load failed: {type(exc).__name__}: {exc}"
            hosted.cause_code = "load_failed"
            error = Unavailable(hosted.cause, code="load_failed")
        hosted.host_bytes = hosted.device_bytes = 0
        hosted.observer.memory(0, 0)
        log_event(
            log,
            "model.load_failed",
            level=logging.WARNING,
            model=hosted.key.model,
            version=hosted.key.version,
            code=hosted.cause_code,
            cause=hosted.cause,
            phases=",".join(hosted.phases),
        )
        if not hosted.done.done():
            hosted.done.set_exception(error)

    def _time_out(self, hosted: _Hosted, generation: int) -> None:
        with self._lock:
            if hosted.generation != generation or hosted.state is not LoadState.LOADING:
                return
            # The thread cannot be stopped; its memory stays accounted until it ends.
            self._abandoned[generation] = (hosted.host_bytes, hosted.device_bytes)
            self._fail(
                hosted,
                Unavailable(
                    f"{hosted.key.ref}: load timed out after {self.load_timeout:g} s",
                    code="load_timeout",
                ),
            )

    # ---- unloading
    def unload(self, key: VersionKey, *, drain_timeout: float = 30.0) -> None:
        """Stop taking requests, answer the queued ones, then free the version."""
        with self._lock:
            hosted = self._hosted.get(key)
            if hosted is None:
                raise NotFound(f"{key.ref} is not loaded", code="model_not_loaded")
            if hosted.state is LoadState.UNLOADING:
                return
            log_event(
                log,
                "model.unload_started",
                model=key.model,
                version=key.version,
                state=hosted.state.value,
            )
            if hosted.state is LoadState.LOADING:
                # The load thread sees the state change and drops what it loads.
                self._abandoned[hosted.generation] = (hosted.host_bytes, hosted.device_bytes)
                self._fail(
                    hosted, Unavailable(f"{key.ref} was unloaded while loading", code="unloaded")
                )
            detached = self._detach(hosted)
        self._release(detached, drain_timeout=drain_timeout)

    def _detach(self, hosted: _Hosted) -> _Hosted:
        """Mark unloading and take out of the dict (memory stays counted until released)."""
        hosted.state = LoadState.UNLOADING
        hosted.generation = -1
        self._hosted.pop(hosted.key, None)
        if self._by_ref.get(hosted.key.ref) == hosted.key:
            del self._by_ref[hosted.key.ref]
        # Still holding memory until released: keep it reserved for admission.
        self._abandoned[-id(hosted)] = (hosted.host_bytes, hosted.device_bytes)
        return hosted

    def _release(self, hosted: _Hosted, *, drain_timeout: float = 30.0) -> None:
        started = time.perf_counter()
        try:
            for loop, batcher in list(hosted.batchers.items()):
                if loop.is_closed():
                    continue
                if _on_loop(loop):
                    batcher.close()
                    continue
                drained = asyncio.run_coroutine_threadsafe(batcher.drain(), loop)
                with contextlib.suppress(Exception):
                    drained.result(timeout=drain_timeout)
            hosted.batchers.clear()
            if hosted.executor is not None:
                hosted.executor.close()
            if hosted.model is not None:
                with contextlib.suppress(Exception):
                    hosted.model.unload()
            hosted.model = hosted.executor = None
        finally:
            hosted.observer.memory(0, 0)
            with self._lock:
                self._abandoned.pop(-id(hosted), None)
            log_event(
                log,
                "model.unloaded",
                model=hosted.key.model,
                version=hosted.key.version,
                drain_and_free_seconds=round(time.perf_counter() - started, 4),
            )

    def close(self) -> None:
        """Unload everything (at process exit)."""
        for key in list(self._hosted):
            with contextlib.suppress(ModelportError):
                self.unload(key, drain_timeout=5.0)

    # ---- serving
    async def infer(
        self,
        key: VersionKey,
        inputs: Mapping[str, np.ndarray],
        *,
        deadline: float,
        priority: Priority = Priority.INTERACTIVE,
        parameters: Mapping[str, Any] | None = None,
    ) -> InferenceResult:
        """Queue one request on the version's batcher and await its outputs."""
        loop = asyncio.get_running_loop()
        with self._lock:
            hosted = self._hosted.get(key)
            if hosted is None or hosted.state is not LoadState.READY:
                raise self._unavailable(hosted, key)
            batcher = hosted.batchers.get(loop)
            if batcher is None:
                batcher = self._new_batcher(hosted, loop)
            hosted.in_flight += 1
        try:
            return await batcher.submit(
                inputs, deadline=deadline, priority=priority, parameters=parameters
            )
        finally:
            now = time.monotonic()
            with self._lock:
                hosted.in_flight -= 1
                hosted.uses = decayed_uses(hosted.uses, hosted.last_used, now) + 1.0
                hosted.last_used = now

    def _new_batcher(self, hosted: _Hosted, loop: asyncio.AbstractEventLoop) -> Batcher:
        for old in [lp for lp in hosted.batchers if lp.is_closed()]:
            del hosted.batchers[old]  # an event loop that ended (tests, restarts)
        assert hosted.executor is not None
        batcher = Batcher(
            hosted.executor,
            hosted.batching,
            hosted.observer,
            name=hosted.key.ref,
            execute_estimate=hosted.execute_estimate,
            tracer=self.tracer,
            clock=self.clock,
        )
        hosted.batchers[loop] = batcher
        return batcher

    # ---- helpers
    def _batching_for(self, manifest: Manifest) -> BatchingConfig:
        defaults = self.batching
        # Merging along dim 0 is only sound when every tensor's first dimension is the batch.
        batchable = all(t.shape and t.shape[0] == -1 for t in [*manifest.inputs, *manifest.outputs])
        size = min(manifest.resources.max_batch_size, defaults.max_batch_size) if batchable else 1
        options = manifest.runtime.get("batching") or {}
        preferred = options.get("preferred_batch_sizes", defaults.preferred_batch_sizes)
        delay = options.get("max_queue_delay_us", defaults.max_queue_delay_us)
        return replace(
            defaults,
            max_batch_size=size,
            preferred_batch_sizes=tuple(int(p) for p in preferred if 1 < int(p) <= size),
            max_queue_delay_us=max(0, int(delay)),
        )

    def _status(self, hosted: _Hosted) -> VersionStatus:
        ledger = self._crash_ledger
        return VersionStatus(
            key=hosted.key,
            state=hosted.state,
            pinned=hosted.pinned,
            cause=hosted.cause,
            cause_code=hosted.cause_code,
            phases=dict(hosted.phases),
            host_memory_bytes=hosted.host_bytes,
            device_memory_bytes=hosted.device_bytes,
            memory_source=hosted.memory_source,
            warm_up=hosted.warm_up,
            in_flight=hosted.in_flight,
            batching=hosted.batching,
            queued=sum(batcher.queued for batcher in list(hosted.batchers.values())),
            crashes=ledger.crashes(hosted.key.ref) if ledger else 0,
            quarantined_seconds=ledger.quarantined_for(hosted.key.ref) if ledger else 0.0,
        )

    def _unavailable(self, hosted: _Hosted | None, key: VersionKey | None = None) -> Unavailable:
        if hosted is None:
            assert key is not None
            return Unavailable(f"{key.ref} is not loaded", code="model_not_loaded")
        if hosted.state is LoadState.FAILED:
            return Unavailable(
                f"{hosted.key.ref} failed to load: {hosted.cause}",
                code="model_load_failed",
                cause=hosted.cause_code,
            )
        return Unavailable(
            f"{hosted.key.ref} is {hosted.state.value}",
            code=f"model_{hosted.state.value}",
            retry_after=1,
        )


def execution_of(manifest: Manifest) -> Execution:
    """How ``manifest``'s version executes (``runtime.execution``, ``thread`` by default)."""
    return Execution(manifest.runtime.get("execution", Execution.THREAD))


def _warm_up(model: LoadedModel, manifest: Manifest) -> tuple[str, float]:
    """Run the first example; return what was done and how long the execution took."""
    if not manifest.examples:
        return "no example in the manifest: ready after load, not warmed up", 0.0
    started = time.perf_counter()
    result = run_example(model, manifest.examples[0])
    elapsed = time.perf_counter() - started
    if not result.passed:
        raise Unprocessable(
            "warm-up: example 0 did not match: " + "; ".join(result.problems),
            code="warmup_mismatch",
            problems=result.problems,
        )
    return "example 0 ran and matched its expected outputs", elapsed


def _on_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False
