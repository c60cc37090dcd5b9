"""The host's handle on one worker process: start it, execute through it, kill it.

The worker runs in a session of its own (``start_new_session``), so ``kill`` ends its
whole process group: anything the model started goes with it. The host owns both
shared-memory segments (inputs, outputs) and unlinks them when the worker ends, however
it ends; a segment grows (a new, larger one) when a batch does not fit.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.shared_memory import SharedMemory
from pathlib import Path
from typing import Any

import numpy as np

from modelport import errors
from modelport.errors import Internal, ModelportError, Unavailable
from modelport.manifest import Manifest
from modelport.runtime.process import tensors
from modelport.runtime.process.protocol import Message, receive, send


@dataclass(frozen=True)
class WorkerSpec:
    """What a worker loads: the format plugin (entry point and options) and the files."""

    format: str
    entry: str
    """The plugin's entry point value, ``module:Class``."""
    options: Mapping[str, object]
    files: Mapping[str, Path]
    manifest: Manifest

    def message(self) -> Message:
        return {
            "format": self.format,
            "entry": self.entry,
            "options": dict(self.options),
            "files": {path: str(local) for path, local in self.files.items()},
            "manifest": self.manifest.model_dump(mode="json"),
        }


class WorkerGone(Exception):
    """The worker process ended while it was needed (a crash: signal or exit)."""

    def __init__(self, how: str) -> None:
        super().__init__(how)
        self.how = how


class WorkerOverdue(Exception):
    """The deadline passed before the worker answered; it has been killed."""


class Worker:
    """One worker process. Not thread-safe: one caller at a time (its executor thread)."""

    def __init__(self, spec: WorkerSpec, *, name: str) -> None:
        self.spec = spec
        self.name = name
        self._process: subprocess.Popen[bytes] | None = None
        self._conn: Connection | None = None
        self._input: SharedMemory | None = None
        self._output: SharedMemory | None = None

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    def start(self, timeout: float) -> None:
        """Start the process and wait until it has loaded the model.

        Raises ``Unavailable`` (``worker_start_timeout``, ``worker_start_failed``) or the
        load's own error (what the plugin raised in the worker)."""
        ours, theirs = socket.socketpair()
        with ours, theirs:
            self._process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "modelport.runtime.process.worker",
                    str(theirs.fileno()),
                    str(os.getpid()),
                ],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
            self._conn = Connection(os.dup(ours.fileno()))
        deadline = time.monotonic() + timeout
        try:
            try:
                send(self._conn, self.spec.message())
            except OSError:
                raise WorkerGone(self._how(wait=True)) from None
            answer = self._receive(deadline)
        except WorkerOverdue:
            raise Unavailable(
                f"{self.name}: the worker did not load the model within {timeout:g} s",
                code="worker_start_timeout",
            ) from None
        except WorkerGone as gone:
            self.kill()
            raise Unavailable(
                f"{self.name}: the worker ended while loading ({gone.how})",
                code="worker_start_failed",
            ) from None
        if answer["op"] != "ready":
            self.kill()
            raise _rebuild(answer, default_code="load_failed", unavailable=True)

    def execute(
        self, inputs: Mapping[str, np.ndarray], deadline: float | None
    ) -> tuple[dict[str, np.ndarray], float]:
        """Execute one batch; its outputs and the seconds spent in the model.

        Raises ``WorkerOverdue`` (killed at ``deadline``, on ``time.monotonic``),
        ``WorkerGone`` (it crashed), or the model's error as a ``ModelportError``."""
        conn = self._connection()
        layout, size = tensors.plan(inputs)
        self._input = _fit(self._input, size)
        self._output = _fit(self._output, 1)
        tensors.write(self._input, inputs, layout)
        send(
            conn,
            {
                "op": "execute",
                "in": _name(self._input),
                "out": _name(self._output),
                "layout": layout,
            },
        )
        while True:
            answer = self._receive(deadline)
            if answer["op"] == "grow":
                self._output = _fit(self._output, int(answer["bytes"]))
                send(conn, {"op": "out", "name": _name(self._output)})
            elif answer["op"] == "done":
                outputs = tensors.read(self._output, answer["layout"], copy=True)
                return outputs, float(answer["seconds"])
            else:
                raise _rebuild(answer, default_code="execution_failed", unavailable=False)

    def _connection(self) -> Connection:
        if self._conn is None or self._process is None or self._process.poll() is not None:
            raise WorkerGone(self._how())
        return self._conn

    def _receive(self, deadline: float | None) -> Message:
        conn = self._connection()
        try:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not conn.poll(remaining):
                self.kill()
                raise WorkerOverdue
            return receive(conn)
        except (EOFError, OSError):
            how = self._how(wait=True)
            self.kill()
            raise WorkerGone(how) from None

    def _how(self, wait: bool = False) -> str:
        process = self._process
        if process is None:
            return "not started"
        code = process.poll()
        if code is None and wait:
            with contextlib.suppress(subprocess.TimeoutExpired):
                code = process.wait(timeout=5.0)
        if code is None:
            return "it closed its control socket"
        if code < 0:
            with contextlib.suppress(ValueError):
                return f"killed by {signal.Signals(-code).name}"
        return f"exit status {code}"

    def kill(self) -> None:
        """End the worker's process group at once and free its segments."""
        process, self._process = self._process, None
        if process is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        self._release()

    def stop(self, timeout: float = 5.0) -> None:
        """Ask the worker to unload and exit; kill it if it has not within ``timeout``."""
        if self._conn is not None and self._process is not None:
            with contextlib.suppress(OSError, ValueError):
                send(self._conn, {"op": "stop"})
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._process.wait(timeout=timeout)
        self.kill()

    def memory_bytes(self) -> int:
        """Resident memory of the worker (0 when it is not running)."""
        import psutil

        if self._process is None:
            return 0
        with contextlib.suppress(psutil.Error):
            return int(psutil.Process(self._process.pid).memory_info().rss)
        return 0

    def _release(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        for segment in (self._input, self._output):
            if segment is not None:
                _drop(segment)
        self._input = self._output = None


def _name(segment: SharedMemory) -> str:
    return segment.name


def _fit(segment: SharedMemory | None, size: int) -> SharedMemory:
    """``segment`` if it holds ``size`` bytes, else a new one (the old one unlinked)."""
    if segment is not None and segment.size >= size:
        return segment
    if segment is not None:
        _drop(segment)
    # Room to grow: a batch a little larger does not make another segment at once.
    return SharedMemory(create=True, size=max(size + size // 2, 1 << 16))


def _drop(segment: SharedMemory) -> None:
    with contextlib.suppress(BufferError):
        segment.close()
    with contextlib.suppress(FileNotFoundError):
        segment.unlink()


def _rebuild(answer: Message, *, default_code: str, unavailable: bool) -> ModelportError:
    """The worker's error as the host raises it: a ``ModelportError`` of the same class
    and code when the model raised one, else ``default_code``."""
    cls: Any = getattr(errors, str(answer.get("class")), None)
    message = str(answer.get("message", "unknown error"))
    if isinstance(cls, type) and issubclass(cls, ModelportError):
        error: ModelportError = cls(message, code=answer.get("code"))
        return error
    if unavailable:
        return Unavailable(f"load failed in the worker: {message}", code=default_code)
    return Internal(f"model execution failed: {message}", code=default_code)
