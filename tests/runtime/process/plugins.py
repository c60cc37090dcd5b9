"""A format plugin for worker-process tests, imported in the worker: ONNX, except that
the first value of input ``x`` can make the execution misbehave for real.

Option ``load_seconds``: the load sleeps that long first (a worker slow to start).
``-1``: the process exits at once (``os._exit(3)``); ``-2``: it raises SIGSEGV on itself;
``-3``: the model raises ``ValueError``. Any other value: the ONNX model's answer.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import numpy as np

from modelport.manifest import Manifest
from modelport.runtime.formats.base import LoadedModel
from modelport.runtime.formats.onnx import OnnxFormat

EXIT, SEGFAULT, RAISE = -1.0, -2.0, -3.0


class _Misbehaving:
    def __init__(self, model: LoadedModel) -> None:
        self.model = model

    def execute(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        first = float(inputs["x"].reshape(-1)[0])
        if first == EXIT:
            os._exit(3)
        if first == SEGFAULT:
            os.kill(os.getpid(), signal.SIGSEGV)
        if first == RAISE:
            raise ValueError("the model refuses this row")
        return self.model.execute(inputs)

    def memory_bytes(self) -> int:
        return self.model.memory_bytes()

    def unload(self) -> None:
        self.model.unload()


class MisbehavingFormat(OnnxFormat):
    name = "misbehaving"

    def __init__(self, *, load_seconds: float = 0.0, **options: object) -> None:
        super().__init__(**options)  # type: ignore[arg-type]
        self.load_seconds = load_seconds

    def load(self, files: dict[str, Path], manifest: Manifest) -> LoadedModel:  # type: ignore[override]
        time.sleep(self.load_seconds)
        return _Misbehaving(super().load(files, manifest))
