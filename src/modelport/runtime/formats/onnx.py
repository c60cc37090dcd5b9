"""ONNX models through onnxruntime.

A model executes its manifest's declared outputs only (onnxruntime computes what they
need, nothing else). A declared output that the graph makes with a ZipMap (skl2onnx's
default for a classifier's probabilities: a sequence of maps) is served as the
``[batch, classes]`` tensor the ZipMap zips (``onnx_graph.unzip``); any other declared
output that is not a tensor, or that the graph lacks, fails the load with a message
that says why.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
import onnxruntime as ort

from modelport.errors import Unprocessable
from modelport.manifest import Manifest
from modelport.runtime.formats import onnx_graph


class OnnxModel:
    def __init__(
        self,
        session: ort.InferenceSession,
        size_hint: int,
        output_names: list[str] | None = None,
    ) -> None:
        self.session = session
        self._size_hint = size_hint
        self.output_names = output_names or [o.name for o in session.get_outputs()]

    def execute(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        for name, array in inputs.items():
            if array.dtype == np.object_:
                inputs = {**inputs, name: _as_text(array)}
        results = self.session.run(self.output_names, inputs)
        return dict(zip(self.output_names, results, strict=True))

    def memory_bytes(self) -> int:
        return self._size_hint

    def unload(self) -> None:
        del self.session


def _as_text(array: np.ndarray) -> np.ndarray:
    """A BYTES tensor as onnxruntime's strings: it takes ``str`` elements and would turn
    ``bytes`` ones into their repr (``"b'...'"``)."""
    items = [
        item.decode("utf-8", "replace") if isinstance(item, bytes) else item
        for item in array.reshape(-1).tolist()
    ]
    out = np.empty(len(items), dtype=np.object_)
    out[:] = items
    return out.reshape(array.shape)


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

    def options(self) -> ort.SessionOptions:
        """Session options from the settings (threads, spinning, graph optimization)."""
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
        return opts

    def session(self, model: str | bytes) -> ort.InferenceSession:
        """A session of ``model`` (a path or a serialized graph) with these options."""
        return self._session(model, self.options())

    def load(self, files: dict[str, Path], manifest: Manifest) -> OnnxModel:
        opts = self.options()
        path = self._model_file(files, manifest)
        session = self._session(str(path), opts)
        declared = [spec.name for spec in manifest.outputs]
        sequences = _sequence_outputs(session, declared, path.name)
        if sequences:
            import onnx

            graph = onnx.load(str(path))
            zipmaps = onnx_graph.find_zipmaps(graph)
            for name in sequences:
                if name not in zipmaps:
                    _refuse(name, "a sequence of maps", path.name)
            session = self._session(onnx_graph.unzip(graph, sequences).SerializeToString(), opts)
        return OnnxModel(session, self.estimate_memory(manifest), declared)

    def _session(self, model: str | bytes, opts: ort.SessionOptions) -> ort.InferenceSession:
        try:
            return ort.InferenceSession(model, sess_options=opts, providers=self.providers)
        except Exception as exc:  # onnxruntime raises its own untyped errors
            raise Unprocessable(
                f"onnxruntime could not load the model: {exc}", code="load_failed"
            ) from None


def _sequence_outputs(
    session: ort.InferenceSession, declared: list[str], filename: str
) -> set[str]:
    """The declared outputs the graph makes as sequences of maps (ZipMaps to unzip);
    refuses declared outputs the graph lacks, and other values that are not tensors."""
    types = {o.name: str(o.type) for o in session.get_outputs()}
    found: set[str] = set()
    for name in declared:
        kind = types.get(name)
        if kind is None:
            raise Unprocessable(
                f"the manifest declares output '{name}', which {filename} does not have; "
                f"its outputs are {', '.join(repr(n) for n in types)}",
                code="unknown_output",
                output=name,
            )
        if kind.startswith("seq(map("):
            found.add(name)
        elif not kind.startswith("tensor("):
            _refuse(name, _described(kind), filename)
    return found


def _described(ort_type: str) -> str:
    """onnxruntime's type string (``seq(tensor(float))``, ``map(string,tensor(float))``)
    in the words ``onnx_graph.describe_type`` uses."""
    if ort_type.startswith("seq("):
        return "a sequence of " + _described(ort_type[4:]).split(" ", 1)[1] + "s"
    if ort_type.startswith("map("):
        return "a map"
    if ort_type.startswith("optional("):
        return "an optional " + _described(ort_type[9:]).split(" ", 1)[1]
    if ort_type.startswith("sparse_tensor("):
        return "a sparse tensor"
    return "a tensor"


def _refuse(name: str, described: str, filename: str) -> NoReturn:
    error = onnx_graph.non_tensor_value(name, "output", described, filename)
    raise Unprocessable(error.message, code=error.code, **error.extra)
