"""A worker's main: load one version through its format plugin, then execute batches.

Started by ``runtime.process.client.Worker`` as ``python -m
modelport.runtime.process.worker FD PARENT`` in a session (process group) of its own,
with the control socket as file descriptor ``FD``. It exits when the host (process
``PARENT``) is gone, even in the middle of a hung execution. It executes one batch at a time: inputs are
read in place from the host's input segment, outputs written to the host's output
segment. A Python exception in the model is answered as ``error`` and the worker goes
on; anything worse ends the process, which the host sees as a crash.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import traceback
from importlib.metadata import EntryPoint
from multiprocessing import resource_tracker
from multiprocessing.connection import Connection
from multiprocessing.shared_memory import SharedMemory
from pathlib import Path
from typing import Any

from modelport.errors import ModelportError
from modelport.manifest import Manifest
from modelport.runtime.formats.base import LoadedModel
from modelport.runtime.formats.registry import GROUP
from modelport.runtime.outputs import DeclaredOutputs
from modelport.runtime.process import tensors
from modelport.runtime.process.protocol import Message, receive, send


def _untrack_shared_memory() -> None:
    # The host owns every segment. Python 3.11 registers a segment with a resource
    # tracker on attach too, which would unlink the host's segments when this process
    # exits (3.13 has ``track=False`` for this).
    def ignore(name: object, rtype: str) -> None:
        pass

    resource_tracker.register = ignore
    resource_tracker.unregister = ignore


def _watch_parent(parent: int, interval: float = 1.0) -> None:
    # Not PR_SET_PDEATHSIG: it fires when the host's *thread* that started the worker
    # ends, and those threads come and go. A thread here runs between the model's steps
    # (a native library releases the GIL; Python code yields it every few ms).
    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(interval)
        os._exit(0)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def load(spec: Message) -> LoadedModel:
    manifest = Manifest.model_validate(spec["manifest"])
    plugin = EntryPoint(spec["format"], spec["entry"], GROUP).load()
    files = {path: Path(local) for path, local in spec["files"].items()}
    model: LoadedModel = plugin(**spec["options"]).load(files, manifest)
    return DeclaredOutputs(model, manifest.outputs)


class _Segments:
    """The host's segments now in use, attached once by name."""

    def __init__(self) -> None:
        self._attached: dict[str, SharedMemory] = {}

    def attach(self, *names: str) -> list[SharedMemory]:
        for name in names:
            if name not in self._attached:
                self._attached[name] = SharedMemory(name=name)
        for name in [n for n in self._attached if n not in names]:
            # The host replaced it with a larger one (and unlinked it).
            self._attached.pop(name).close()
        return [self._attached[n] for n in names]


def _error(exc: BaseException) -> Message:
    if isinstance(exc, ModelportError):
        return {
            "op": "error",
            "class": type(exc).__name__,
            "code": exc.code,
            "message": exc.message,
        }
    return {"op": "error", "class": None, "code": None, "message": f"{type(exc).__name__}: {exc}"}


def execute(conn: Connection, model: LoadedModel, segments: _Segments, message: Message) -> None:
    source, target = segments.attach(message["in"], message["out"])
    inputs = tensors.read(source, message["layout"], copy=False)
    try:
        started = time.perf_counter()
        outputs = model.execute(inputs)
        seconds = time.perf_counter() - started
        layout, size = tensors.plan(outputs)
    except Exception as exc:  # the model's own failure: answered, the worker goes on
        send(conn, _error(exc))
        return
    finally:
        del inputs  # the views must not outlive the segment's mapping
    if size > target.size:
        send(conn, {"op": "grow", "bytes": size})
        answer = receive(conn)
        source, target = segments.attach(message["in"], answer["name"])
    tensors.write(target, outputs, layout)
    send(conn, {"op": "done", "layout": layout, "seconds": seconds})


def serve(conn: Connection) -> int:
    _untrack_shared_memory()
    spec = receive(conn)
    try:
        model = load(spec)
    except Exception as exc:
        failed = _error(exc)
        failed["op"] = "failed"
        failed["trace"] = traceback.format_exc(limit=5)
        send(conn, failed)
        return 1
    send(conn, {"op": "ready"})
    segments = _Segments()
    while True:
        try:
            message = receive(conn)
        except EOFError:
            return 0  # the host is gone
        if message["op"] == "stop":
            model.unload()
            return 0
        execute(conn, model, segments, message)


def main(argv: list[str] | None = None) -> Any:
    args = sys.argv[1:] if argv is None else argv
    _watch_parent(int(args[1]))
    return serve(Connection(int(args[0])))


if __name__ == "__main__":
    sys.exit(main())
