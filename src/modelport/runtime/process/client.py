"""The host's handle on one worker process: start it, execute through it, kill it.

The worker is started by a ``WorkerLauncher`` (a clean exec under the sandbox: no
credential of the server's reaches it) in a session of its own, so ``kill`` ends its
whole process group: anything the model started goes with it. The host owns both
shared-memory segments (inputs, outputs), passes them to the worker as descriptors and
closes them when the worker ends, however it ends; a segment grows (a new, larger one)
when a batch does not fit, the outputs' up to ``MAX_SEGMENT_BYTES``. What the worker
answers is checked before it is used: a malformed or out-of-bounds output layout, or a
larger segment asked for, kills the worker (``WorkerMisbehaved``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

from modelport import errors
from modelport.errors import Internal, ModelportError, Unavailable
from modelport.manifest import Manifest
from modelport.runtime.process import tensors
from modelport.runtime.process.launching import (
    WORKER_MODULE,
    Launched,
    WorkerLauncher,
    unisolated,
)
from modelport.runtime.process.protocol import Message, receive, send, send_fds
from modelport.runtime.process.segments import Segment

MAX_SEGMENT_BYTES = 1 << 32
"""Largest output segment a worker may ask for (4 GiB): a batch's outputs, numbers and
encoded strings together, fit in it."""


@dataclass(frozen=True)
class WorkerSpec:
    """What a worker loads: the format plugin (entry point and options) and the files."""

    format: str
    entry: str
    """The plugin's entry point value, ``module:Class``."""
    options: Mapping[str, object]
    files: Mapping[str, Path]
    manifest: Manifest
    name: str = ""
    """``owner/name:version``: labels what the worker logs and measures."""

    def message(self) -> Message:
        return {
            "format": self.format,
            "entry": self.entry,
            "options": dict(self.options),
            "files": {path: str(local) for path, local in self.files.items()},
            "manifest": self.manifest.model_dump(mode="json"),
            "name": self.name,
        }


class WorkerGone(Exception):
    """The worker process ended while it was needed (a crash: signal or exit)."""

    def __init__(self, how: str) -> None:
        super().__init__(how)
        self.how = how


class WorkerMisbehaved(WorkerGone):
    """The worker answered outside the protocol (a malformed or out-of-bounds output
    layout, an output segment past ``MAX_SEGMENT_BYTES``); it has been killed."""


class WorkerOverdue(Exception):
    """The deadline passed before the worker answered; it has been killed."""


class Worker:
    """One worker process. Not thread-safe: one caller at a time (its executor thread)."""

    def __init__(
        self,
        spec: WorkerSpec,
        *,
        name: str,
        launcher: WorkerLauncher | None = None,
        module: str = WORKER_MODULE,
    ) -> None:
        self.spec = spec
        self.name = name
        self.launcher = launcher or unisolated()
        self.module = module
        """The worker's main: tensor execution, or a generative engine's host."""
        self.ready: Message = {}
        """The worker's ``ready`` message."""
        self.isolation: str | None = None
        """How the running worker is confined (``bubblewrap``, ``none``)."""
        self._launched: Launched | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._conn: Connection | None = None
        self._input: Segment | None = None
        self._output: Segment | None = None
        self._passed: set[str] = set()
        """Segments the worker has been passed (by name)."""

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    def start(self, timeout: float) -> None:
        """Start the process and wait until it has loaded the model.

        Raises ``Unavailable`` (``worker_start_timeout``, ``worker_start_failed``;
        ``sandbox_unavailable`` where the operator's isolation cannot be had) or the
        load's own error (what the plugin raised in the worker)."""
        ours, theirs = socket.socketpair()
        with ours, theirs:
            self._launched = self.launcher.launch(
                [str(theirs.fileno())],
                files=list(self.spec.files.values()),
                fd=theirs.fileno(),
                module=self.module,
            )
            self._process = self._launched.process
            self.isolation = self._launched.isolation
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
            raise rebuild(answer, default_code="load_failed", unavailable=True)
        self.ready = answer

    @property
    def connection(self) -> Connection:
        """The control socket of the running worker (``WorkerGone`` when it is not)."""
        return self._connection()

    def how(self) -> str:
        """How the worker ended (waiting a little for its exit status)."""
        return self._how(wait=True)

    def execute(
        self, inputs: Mapping[str, np.ndarray], deadline: float | None
    ) -> tuple[dict[str, np.ndarray], float]:
        """Execute one batch; its outputs and the seconds spent in the model.

        Raises ``WorkerOverdue`` (killed at ``deadline``, on ``time.monotonic``),
        ``WorkerGone`` (it crashed), or the model's error as a ``ModelportError``."""
        conn = self._connection()
        planned = tensors.plan(inputs)
        self._input = self._fit(self._input, planned.size)
        self._output = self._fit(self._output, 1)
        tensors.write(self._input, inputs, planned)
        message = {"op": "execute", "in": self._input.name, "out": self._output.name}
        self._send_with_segments(conn, message | {"layout": planned.layout})
        while True:
            answer = self._receive(deadline)
            if answer.get("op") == "grow":
                size = answer.get("bytes")
                if type(size) is not int or not 0 <= size <= MAX_SEGMENT_BYTES:
                    self._misbehaved(f"it asked for an output segment of {size!r} bytes")
                self._output = self._fit(self._output, size)
                self._send_with_segments(conn, {"op": "out", "name": self._output.name})
            elif answer.get("op") == "done":
                seconds = answer.get("seconds")
                if not isinstance(seconds, int | float) or isinstance(seconds, bool):
                    self._misbehaved(f"it answered {seconds!r} seconds")
                try:
                    outputs = tensors.read(self._output, answer.get("layout"), copy=True)
                except tensors.LayoutError as exc:
                    self._misbehaved(f"its outputs' layout does not hold: {exc}")
                return outputs, float(seconds)
            else:
                raise rebuild(answer, default_code="execution_failed", unavailable=False)

    def _misbehaved(self, how: str) -> NoReturn:
        """The worker answered outside the protocol: it is killed (nothing it says from
        now on can be trusted to be in step)."""
        self.kill()
        raise WorkerMisbehaved(how)

    def _send_with_segments(self, conn: Connection, message: Message) -> None:
        """Send ``message``, then the descriptors of the segments it names that the
        worker does not hold yet."""
        new = [
            segment
            for segment in (self._input, self._output)
            if segment is not None
            and segment.name not in self._passed
            and segment.name in (message.get("in"), message.get("out"), message.get("name"))
        ]
        try:
            send(conn, message | {"fds": [segment.name for segment in new]})
            send_fds(conn, [segment.fd for segment in new])
        except OSError:
            raise WorkerGone(self._how(wait=True)) from None
        self._passed.update(segment.name for segment in new)

    def _fit(self, segment: Segment | None, size: int) -> Segment:
        """``segment`` if it holds ``size`` bytes, else a new one (the old one closed)."""
        if segment is not None and segment.size >= size:
            return segment
        if segment is not None:
            self._passed.discard(segment.name)
            segment.close()
        # Room to grow: a batch a little larger does not make another segment at once.
        return Segment.create(max(size + size // 2, 1 << 16))

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
        launched, self._launched = self._launched, None
        if launched is not None:
            launched.remove_scratch()

    def stop(self, timeout: float = 5.0) -> None:
        """Ask the worker to unload and exit; kill it if it has not within ``timeout``."""
        if self._conn is not None and self._process is not None:
            with contextlib.suppress(OSError, ValueError):
                send(self._conn, {"op": "stop"})
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._process.wait(timeout=timeout)
        self.kill()

    def memory_bytes(self) -> int:
        """Resident memory of the worker and of its descendants (under bubblewrap the
        process started is bubblewrap's; the model's is its child): 0 when it is not
        running."""
        import psutil

        if self._process is None:
            return 0
        total = 0
        with contextlib.suppress(psutil.Error):
            top = psutil.Process(self._process.pid)
            for each in [top, *top.children(recursive=True)]:
                with contextlib.suppress(psutil.Error):
                    total += int(each.memory_info().rss)
        return total

    def _release(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        for segment in (self._input, self._output):
            if segment is not None:
                segment.close()
        self._input = self._output = None
        self._passed.clear()


def rebuild(answer: Message, *, default_code: str, unavailable: bool) -> ModelportError:
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
