"""A format plugin for worker-process tests, imported in the worker: ONNX, except that
the first value of input ``x`` can make the execution misbehave for real.

Option ``load_seconds``: the load sleeps that long first (a worker slow to start).
``-1``: the process exits at once (``os._exit(3)``); ``-2``: it raises SIGSEGV on itself;
``-3``: the model raises ``ValueError``. Any other value: the ONNX model's answer.

``LyingFormat``: a worker whose outputs' layout lies (the publisher's code runs in the
worker's process and can change what it answers).
"""

from __future__ import annotations

import os
import signal
import struct
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

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


LIES = ("region", "length", "grow")


class _Lying:
    """Answers through the worker's own code, then lies about where its outputs are: the
    first element of input ``text`` names the lie (``LIES``), anything else is honest."""

    def __init__(self, model: LoadedModel) -> None:
        from modelport.runtime.process import tensors

        self.model = model
        self.honest = tensors.plan, tensors.write
        self.planned: Any = None
        self.lie = ""
        # What the worker calls next for the outputs: the bytes are written where the
        # honest plan puts them, the layout sent is the lie.
        tensors.plan, tensors.write = self._plan, self._write

    def _write(self, segment: Any, arrays: Mapping[str, np.ndarray], planned: Any) -> None:
        self.honest[1](segment, arrays, self.planned)

    def _plan(self, arrays: Mapping[str, np.ndarray]) -> Any:
        planned = self.planned = self.honest[0](arrays)
        planned = replace(planned, encoded=dict(planned.encoded))
        layout = [list(entry) for entry in planned.layout]
        if self.lie == "region":  # strings said to reach far past the segment
            layout[0][4] = 1 << 40
        elif self.lie == "length":  # an element longer than its region
            lying = struct.pack("<I", 1 << 20) + planned.encoded["echo"][4:]
            self.planned = replace(planned, encoded={**planned.encoded, "echo": lying})
        elif self.lie == "grow":  # an output segment past any bound
            return replace(planned, size=1 << 50)
        return replace(planned, layout=layout)

    def execute(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        first = inputs["text"].reshape(-1)[0]
        self.lie = first.decode() if first.decode() in LIES else ""
        return self.model.execute(inputs)

    def memory_bytes(self) -> int:
        return self.model.memory_bytes()

    def unload(self) -> None:
        self.model.unload()


class LyingFormat(OnnxFormat):
    """ONNX, whose worker lies about its outputs (``_Lying``)."""

    name = "lying"

    def load(self, files: dict[str, Path], manifest: Manifest) -> LoadedModel:  # type: ignore[override]
        return _Lying(super().load(files, manifest))
