"""Warm sandboxed workers: long-lived children of the sandbox that answer framed
requests (``modelport.sandbox.frames``) on their standard input and output, so a call
pays no process start.

``WarmWorker``: one child. ``call`` writes a request and reads its answer by a deadline;
past it the child is killed (with its process group) and ``ProcessingTimeout`` raised;
a child that dies, or answers nonsense, is killed and ``ProcessingFailed`` raised, as when
the code raised (the worker answers why). A worker that raised is never used again.

``WarmPool``: at most ``size`` workers of one kind (one version's code), the same number
of calls at once; an idle worker is reused, a missing one started (up to the start
timeout), a failed one dropped and replaced by the next call that needs it. ``reap``
(called every few seconds by the pool's owner) stops a worker idle for longer than
``idle_seconds`` (on the injectable clock), and kills one whose CPU time grew by more
than ``idle_cpu_seconds`` since its last call ended (code it left running: a thread that
spins after its call returned); ``on_reap`` is told either, and the next call starts a
fresh worker.

Blocking (pipes and a semaphore): call from a worker thread (``asyncio.to_thread``).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import select
import signal
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any

import numpy as np

from modelport.clock import Clock, SystemClock
from modelport.errors import DeadlineExceeded, Internal
from modelport.sandbox import frames
from modelport.sandbox.spawn import Started

log = logging.getLogger(__name__)
_STDERR_TAIL = 2000
_PIPE_BYTES = 1 << 20


class ProcessingFailed(Internal):
    """Publisher code raised, or its worker died or broke the protocol (500)."""

    default_code = "processing_failed"


class ProcessingTimeout(DeadlineExceeded):
    """Publisher code did not answer by the call's deadline; its worker was killed (504)."""

    default_code = "processing_timeout"


Tensors = Mapping[str, np.ndarray]


class WarmWorker:
    """One started child; see the module's docstring."""

    def __init__(
        self, started: Started, stderr: Path | None = None, *, max_answer_bytes: int = 1 << 30
    ) -> None:
        self.started = started
        self.stderr = stderr
        self.max_answer_bytes = max_answer_bytes
        """Most bytes one answer may carry: the child cannot make the server buffer more."""
        process = started.process
        assert process.stdin is not None and process.stdout is not None
        self._stdin: IO[bytes] = process.stdin
        self._stdout = process.stdout.fileno()
        self._buffer = bytearray()
        self.alive = True
        self.idle_since = 0.0
        """When its last call ended (the pool's clock)."""
        self.idle_cpu = 0.0
        """Its CPU seconds when its last call ended."""
        for pipe in (self._stdin.fileno(), self._stdout):
            # Larger pipes: a tensor of a few MiB crosses in few reads and writes.
            with contextlib.suppress(OSError, AttributeError):
                fcntl.fcntl(pipe, fcntl.F_SETPIPE_SZ, _PIPE_BYTES)

    def wait_ready(self, deadline: float) -> None:
        """Read the child's first frame: ready, or why it is not (its code failed to import)."""
        header, _ = self._read(deadline, what="start")
        if not header.get("ready"):
            self.close()
            raise ProcessingFailed(
                f"the processing code failed to load: {header.get('error', 'unknown error')}"
            )

    def call(
        self, header: Mapping[str, Any], tensors: Tensors, deadline: float
    ) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """Send one request and read its answer (header and tensors) by ``deadline``
        (``time.monotonic()``)."""
        if not self.alive:
            raise ProcessingFailed("this processing worker was stopped")
        try:
            parts = frames.encode(header, tensors)
        except frames.FrameError as exc:
            raise ProcessingFailed(f"cannot send to the processing code: {exc}") from None
        try:
            for part in parts:
                self._stdin.write(part)
            self._stdin.flush()
        except OSError:  # the child is gone (BrokenPipeError)
            raise self._died("while it was sent a request") from None
        answer, outputs = self._read(deadline, what="call")
        if not answer.get("ok"):
            # Whatever state the code left behind goes with its worker.
            self.close()
            raise ProcessingFailed(f"the processing code failed: {answer.get('error', '?')}")
        return answer, outputs

    def _read(self, deadline: float, *, what: str) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        taken = 0

        def read_exact(n: int) -> bytes:
            nonlocal taken
            taken += n
            if taken > self.max_answer_bytes:
                raise frames.FrameError(f"an answer of over {self.max_answer_bytes} bytes")
            while len(self._buffer) < n:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError
                ready, _, _ = select.select([self._stdout], [], [], remaining)
                if not ready:
                    raise TimeoutError
                chunk = os.read(self._stdout, max(1 << 16, n - len(self._buffer)))
                if not chunk:
                    raise EOFError
                self._buffer += chunk
            data = bytes(self._buffer[:n])
            del self._buffer[:n]
            return data

        try:
            return frames.decode(read_exact)
        except TimeoutError:
            self.close()
            verb = "start" if what == "start" else "answer"
            raise ProcessingTimeout(
                f"the processing code did not {verb} in time; its worker was stopped"
            ) from None
        except EOFError:
            raise self._died("before it answered") from None
        except frames.FrameError as exc:
            self.close()
            raise ProcessingFailed(f"the processing worker answered nonsense: {exc}") from None

    def _died(self, when: str) -> ProcessingFailed:
        process = self.started.process
        self.close()
        code = process.returncode
        if code is not None and code > 128:
            code = 128 - code  # bubblewrap reports a child killed by N as 128+N
        how = f"exited with status {code}"
        if code is not None and code < 0:
            with contextlib.suppress(ValueError):
                how = f"was killed by {signal.Signals(-code).name}"
        # The log may hold what other calls printed: it goes to the server's log, never
        # to this caller.
        log.warning("processing worker %s %s; its log ends: %s", how, when, self._stderr_tail())
        return ProcessingFailed(f"the processing worker {how} {when}")

    def _stderr_tail(self) -> str:
        if self.stderr is None:
            return ""
        try:
            with self.stderr.open("rb") as f:
                f.seek(max(0, f.seek(0, os.SEEK_END) - _STDERR_TAIL))
                return f.read().decode(errors="replace").strip()
        except OSError:
            return ""

    def close(self) -> None:
        """Stop the child and its process group (idempotent)."""
        self.alive = False
        with contextlib.suppress(OSError):
            self._stdin.close()
        self.started.stop()
        with contextlib.suppress(OSError):
            self.started.process.stdout.close()  # type: ignore[union-attr]


Reap = Callable[[str, float], None]
"""Told why a worker was reaped (``idle``, ``idle_cpu``), and the CPU seconds it used
since its last call."""


class WarmPool:
    """Up to ``size`` workers made by ``start(deadline)``, as many calls at once."""

    def __init__(
        self,
        start: Callable[[float], WarmWorker],
        *,
        size: int,
        start_timeout: float,
        idle_seconds: float | None = None,
        idle_cpu_seconds: float | None = None,
        clock: Clock | None = None,
        on_reap: Reap | None = None,
    ):
        self._start = start
        self.size = size
        self.start_timeout = start_timeout
        self.idle_seconds = idle_seconds
        self.idle_cpu_seconds = idle_cpu_seconds
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.on_reap = on_reap
        self._slots = threading.BoundedSemaphore(size)
        self._idle: list[WarmWorker] = []
        self._lock = threading.Lock()
        self._closed = False
        self.started = 0
        """Workers started so far (a replaced one counts again)."""

    def call(
        self, header: Mapping[str, Any], tensors: Tensors, deadline: float
    ) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """One call on a free worker, by ``deadline``; waits for a slot until then."""
        if not self._slots.acquire(timeout=max(0.0, deadline - time.monotonic())):
            raise ProcessingTimeout(
                f"all {self.size} processing worker(s) of this version stayed busy until "
                "the deadline"
            )
        try:
            worker = self._take()
            answer = worker.call(header, tensors, deadline)
            self._give(worker)
            return answer
        finally:
            self._slots.release()

    def _take(self) -> WarmWorker:
        with self._lock:
            if self._closed:
                raise ProcessingFailed("the processing pool is closed")
            while self._idle:
                worker = self._idle.pop()
                if worker.alive and worker.started.process.poll() is None:
                    return worker
                worker.close()
            self.started += 1
        worker = self._start(time.monotonic() + self.start_timeout)
        return worker

    def _give(self, worker: WarmWorker) -> None:
        if worker.alive and self.idle_cpu_seconds is not None:
            worker.idle_cpu = worker.started.cpu_seconds()
        worker.idle_since = self.clock.monotonic()
        with self._lock:
            if not self._closed and worker.alive:
                self._idle.append(worker)
                return
        worker.close()

    def reap(self) -> list[str]:
        """Stop the idle workers past their idle time or idle CPU budget (see the
        module's docstring); why, for each."""
        with self._lock:
            idle = list(self._idle)
        now = self.clock.monotonic()
        due: list[tuple[WarmWorker, str, float]] = []
        for worker in idle:
            used = 0.0
            if self.idle_cpu_seconds is not None:
                used = worker.started.cpu_seconds() - worker.idle_cpu
            if self.idle_cpu_seconds is not None and used > self.idle_cpu_seconds:
                due.append((worker, "idle_cpu", used))
            elif self.idle_seconds is not None and now - worker.idle_since >= self.idle_seconds:
                due.append((worker, "idle", used))
        reaped: list[str] = []
        for worker, reason, used in due:
            with self._lock:
                if worker not in self._idle:
                    continue  # a call took it meanwhile
                self._idle.remove(worker)
            worker.close()
            reaped.append(reason)
            if self.on_reap is not None:
                self.on_reap(reason, used)
        return reaped

    @property
    def idle(self) -> int:
        """Workers waiting for a call."""
        with self._lock:
            return len(self._idle)

    def close(self) -> None:
        """Stop the idle workers; a busy one stops as its call ends."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.close()
