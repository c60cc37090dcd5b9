"""A worker's main: load one version through its format plugin, then execute batches.

Started by ``runtime.process.client.Worker`` (through its ``WorkerLauncher``: a clean
exec, an empty environment, under the sandbox) as ``python -m
modelport.runtime.process.worker FD`` in a session (process group) of its own, with the
control socket as file descriptor ``FD``; it learns what to load from that socket, and
holds nothing of the server's but the version's files. It exits when its parent (the
host, or bubblewrap's process for it) is gone, even in the middle of a hung execution. It executes one batch at a time: inputs are
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
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from modelport.errors import ModelportError
from modelport.manifest import Manifest
from modelport.runtime.formats.base import LoadedModel
from modelport.runtime.formats.registry import GROUP
from modelport.runtime.outputs import DeclaredOutputs
from modelport.runtime.process import tensors
from modelport.runtime.process.protocol import Message, receive, receive_fds, send
from modelport.runtime.process.segments import Segment


def watch_parent(parent: int, interval: float = 1.0) -> None:
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
    """The host's segments now in use, each mapped once from the descriptor the host
    passed after the message that first named it."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self._attached: dict[str, Segment] = {}

    def attach(self, message: Message, *names: str) -> list[Segment]:
        new = list(message.get("fds", []))
        for name, fd in zip(new, receive_fds(self._conn, len(new)), strict=True):
            self._attached[name] = Segment.attach(fd, name)
        for name in [n for n in self._attached if n not in names]:
            # The host replaced it with a larger one.
            self._attached.pop(name).close()
        missing = [n for n in names if n not in self._attached]
        if missing:
            raise EOFError(f"the host named segments it never passed: {missing}")
        return [self._attached[n] for n in names]


def error_message(exc: BaseException) -> Message:
    if isinstance(exc, ModelportError):
        return {
            "op": "error",
            "class": type(exc).__name__,
            "code": exc.code,
            "message": exc.message,
        }
    return {"op": "error", "class": None, "code": None, "message": f"{type(exc).__name__}: {exc}"}


def execute(conn: Connection, model: LoadedModel, segments: _Segments, message: Message) -> None:
    source, target = segments.attach(message, message["in"], message["out"])
    inputs = tensors.read(source, message["layout"], copy=False)
    try:
        started = time.perf_counter()
        outputs = model.execute(inputs)
        seconds = time.perf_counter() - started
        planned = tensors.plan(outputs)
    except Exception as exc:  # the model's own failure: answered, the worker goes on
        send(conn, error_message(exc))
        return
    finally:
        del inputs  # the views must not outlive the segment's mapping
    if planned.size > target.size:
        send(conn, {"op": "grow", "bytes": planned.size})
        answer = receive(conn)
        source, target = segments.attach(answer, message["in"], answer["name"])
    tensors.write(target, outputs, planned)
    send(conn, {"op": "done", "layout": planned.layout, "seconds": seconds})


def serve(conn: Connection) -> int:
    spec = receive(conn)
    try:
        model = load(spec)
    except Exception as exc:
        failed = error_message(exc)
        failed["op"] = "failed"
        failed["trace"] = traceback.format_exc(limit=5)
        send(conn, failed)
        return 1
    send(conn, {"op": "ready"})
    segments = _Segments(conn)
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
    # The parent now, not a pid from the command line: in a PID namespace of its own,
    # the host's pid means nothing here.
    watch_parent(os.getppid())
    return serve(Connection(int(args[0])))


if __name__ == "__main__":
    sys.exit(main())
