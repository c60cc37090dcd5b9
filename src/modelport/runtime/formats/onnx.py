"""ONNX models through onnxruntime."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort

from modelport.errors import Unprocessable
from modelport.manifest import Manifest


class OnnxModel:
    def __init__(self, session: ort.InferenceSession, size_hint: int) -> None:
        self.session = session
        self._size_hint = size_hint
        self.output_names = [o.name for o in session.get_outputs()]

    def execute(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        results = self.session.run(self.output_names, inputs)
        return dict(zip(self.output_names, results, strict=True))

    def memory_bytes(self) -> int:
        return self._size_hint

    def unload(self) -> None:
        del self.session


def default_intra_op_threads() -> int:
    """One fewer than the CPUs this process may run on, at least one: the event loop,
    which parses, validates and answers every request, keeps a core of its own."""
    return max(1, len(os.sched_getaffinity(0)) - 1)


class OnnxFormat:
    """Loads ``.onnx`` graphs; session options come from config."""

    name = "onnx"

    def __init__(
        self,
        *,
        intra_op_threads: int = 0,
        intra_op_spinning: bool = False,
        inter_op_threads: int = 0,
        graph_optimization: str = "all",
        providers: list[str] | None = None,
    ) -> None:
        self.intra_op_threads = intra_op_threads
        self.intra_op_spinning = intra_op_spinning
        self.inter_op_threads = inter_op_threads
        self.graph_optimization = graph_optimization
        available = ort.get_available_providers()
        wanted = providers or ["CUDAExecutionProvider", "CPUExecutionProvider"]
        self.providers = [p for p in wanted if p in available] or ["CPUExecutionProvider"]

    def _model_file(self, files: dict[str, Path], manifest: Manifest) -> Path:
        entry = manifest.runtime.get("entrypoint")
        if entry:
            if entry not in files:
                raise Unprocessable(
                    f"entrypoint '{entry}' is not among the files", code="bad_entry"
                )
            return files[entry]
        onnx_files = [p for name, p in files.items() if name.endswith(".onnx")]
        if len(onnx_files) != 1:
            raise Unprocessable(
                "an onnx manifest needs exactly one .onnx file or runtime.entrypoint",
                code="bad_entry",
            )
        return onnx_files[0]

    def estimate_memory(self, manifest: Manifest) -> int:
        declared = manifest.resources.host_memory_bytes
        if declared:
            return declared
        # Weights dominate; onnxruntime's arena and optimized copies roughly double them.
        return 2 * sum(f.size for f in manifest.files) + (8 << 20)

    def load(self, files: dict[str, Path], manifest: Manifest) -> OnnxModel:
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = self.intra_op_threads or default_intra_op_threads()
        opts.inter_op_num_threads = self.inter_op_threads
        # By default idle pool threads sleep instead of spinning: a spinning pool takes the
        # CPU the event loop (and the next batch's caller) needs between runs. On a host
        # of its own, spinning saves each small batch the threads' wake-up.
        spinning = "1" if self.intra_op_spinning else "0"
        opts.add_session_config_entry("session.intra_op.allow_spinning", spinning)
        levels: dict[str, Any] = {
            "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
            "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
            "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
            "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
        }
        opts.graph_optimization_level = levels.get(self.graph_optimization, levels["all"])
        path = self._model_file(files, manifest)
        try:
            session = ort.InferenceSession(str(path), sess_options=opts, providers=self.providers)
        except Exception as exc:  # onnxruntime raises its own untyped errors
            raise Unprocessable(
                f"onnxruntime could not load the model: {exc}", code="load_failed"
            ) from None
        return OnnxModel(session, self.estimate_memory(manifest))
