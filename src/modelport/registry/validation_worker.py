"""Load a version and run its examples, in a process of its own; answer the outputs.

``python -m modelport.registry.validation_worker DIR``, in the sandbox
(``modelport.sandbox``: its launcher set the limits and the system-call filter first).

``DIR`` (read-only) holds ``manifest.json`` and the verified files under ``files/``. A
generative version (``registry.verdict.runs_generatively``) is loaded by its format's
generative plugin, which decodes each example greedily from a fixed seed; any other
version is loaded as a tensor model. A version with processing code
(``manifest.processing``) has each example run through it, in this process: preprocess,
the model, postprocess; a failure of the code fails that example.

This process judges nothing: it writes, on its standard output, the outputs each example
gave (the answer, framed as ``modelport.registry.verdict`` describes), and the platform
compares them with the examples. Everything else this process or the code it runs prints
goes to its standard error, so nothing but the answer reaches the pipe.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

VALIDATION_OPTIONS: dict[str, dict[str, object]] = {
    "transformers": {"device": "cpu", "dtype": "float32"},
}
"""Format options of validation. transformers models are checked on the CPU in float32,
where ``modelport push`` computed their examples: greedy tokens are compared exactly,
and a GPU in half precision may pick another token where two are nearly tied."""

_OOM_MARKERS = (
    "bad_alloc",
    "failed to allocate",
    "cannot allocate memory",
    "out of memory",
    "failed to map segment",  # a shared library could not be mapped under the limit
)


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 3)


def run(directory: Path, send: Callable[[dict[str, Any], dict[str, Any]], None]) -> None:
    """Load the model in ``directory`` and run every example, sending each frame of the
    answer through ``send(header, tensors)``; never raises."""
    start = time.perf_counter()
    try:
        from modelport.manifest import stored_manifest

        manifest = stored_manifest((directory / "manifest.json").read_bytes())
        files = {f.path: directory / "files" / f.path for f in manifest.files}
        outputs_of = _outputs_of(files, manifest, directory / "files")
    except MemoryError as exc:
        send(_out_of_memory(exc), {})
        return
    except Exception as exc:  # load errors of any kind are the model's fault
        message = _describe(exc)
        failed = "out_of_memory" if _is_oom(message) else "load_failed"
        send({"failed": failed, "detail": message}, {})
        return
    send({"loaded": True, "load_ms": _ms(start)}, {})
    for index, example in enumerate(manifest.examples):
        started = time.perf_counter()
        wanted = {t.name for t in example.outputs}
        try:
            outputs = outputs_of(example)
            answer = {name: value for name, value in outputs.items() if name in wanted}
            header: dict[str, Any] = {"example": index, "ms": _ms(started)}
        except MemoryError as exc:
            send(_out_of_memory(exc), {})
            return
        except Exception as exc:  # a model error fails this example, not the worker
            if _is_oom(_describe(exc)):
                send(_out_of_memory(exc), {})
                return
            answer = {}
            header = {"example": index, "ms": _ms(started), "error": _describe(exc)}
        send(header, answer)


def _out_of_memory(exc: BaseException) -> dict[str, Any]:
    detail = "ran out of memory under the validation memory limit: " + _describe(exc)
    return {"failed": "out_of_memory", "detail": detail}


def _outputs_of(
    files: dict[str, Path], manifest: Any, package: Path
) -> Callable[[Any], dict[str, Any]]:
    """Load the model; answer what gives one example's outputs. A generative version
    has its examples decoded greedily by its format's generative plugin; any other is
    loaded as a tensor model."""
    from modelport.registry.verdict import runs_generatively
    from modelport.runtime.examples import example_inputs
    from modelport.runtime.formats import get_format
    from modelport.runtime.formats.registry import generative_formats
    from modelport.runtime.outputs import DeclaredOutputs

    options = VALIDATION_OPTIONS.get(manifest.format)
    if runs_generatively(manifest):
        plugin: Any = generative_formats({manifest.format: options or {}})[manifest.format]
        generated: Callable[[Any], dict[str, Any]] = plugin.example_outputs(files, manifest)
        return generated
    # Examples see what callers will: the declared outputs, in declared datatypes.
    runtime = manifest.for_runtime()
    model: Any = DeclaredOutputs(
        get_format(manifest.format, options).load(files, runtime), runtime.outputs
    )
    if manifest.processing is not None:
        model = _Processed(model, manifest, package)

    def outputs_of(example: Any) -> dict[str, Any]:
        return dict(model.execute(example_inputs(example)))

    return outputs_of


class _Processed:
    """The model between the version's processing code, as a caller's request meets it:
    the examples (the caller's tensors) go through preprocess, the model, postprocess.
    The code runs here, in this sandboxed process, under its limits and filter."""

    def __init__(self, model: Any, manifest: Any, package: Path) -> None:
        from modelport.sandbox import processing_code

        processing = manifest.processing
        self.model = model
        self.runtime = manifest.for_runtime()
        self.manifest = manifest
        entries = {"preprocess": processing.preprocess, "postprocess": processing.postprocess}
        try:
            self.stages = processing_code.load(package, entries)
        except Exception as exc:
            raise RuntimeError(f"the processing code failed to load: {_describe(exc)}") from exc

    def execute(self, inputs: dict[str, Any]) -> dict[str, Any]:
        from modelport.runtime.conform import conform
        from modelport.sandbox import processing_code

        pre = self.stages.get("preprocess")
        if pre is not None:
            inputs = conform("preprocess", processing_code.call(pre, inputs), self.runtime.inputs)
        outputs = dict(self.model.execute(inputs))
        post = self.stages.get("postprocess")
        if post is not None:
            outputs = conform(
                "postprocess", processing_code.call(post, outputs), self.manifest.outputs
            )
        return outputs


def _is_oom(message: str) -> bool:
    lowered = message.lower()
    return any(marker in lowered for marker in _OOM_MARKERS)


def _describe(exc: BaseException) -> str:
    text = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    return text[:2000]


def _sender(out: IO[bytes]) -> Callable[[dict[str, Any], dict[str, Any]], None]:
    from modelport.sandbox import frames

    def send(header: dict[str, Any], tensors: dict[str, Any]) -> None:
        try:
            parts = frames.encode(header, tensors)
        except frames.FrameError as exc:  # an output with no tensor form fails its example
            parts = frames.encode({**header, "error": str(exc)}, {})
        for part in parts:
            out.write(part)
        out.flush()

    return send


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="modelport.registry.validation_worker")
    parser.add_argument("directory", type=Path)
    args = parser.parse_args(argv)
    # The answer goes on the real standard output; whatever else is printed (native
    # libraries, the publisher's code) goes to the standard error.
    out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    # The libraries' caches (onnxruntime's, Hugging Face's) go to a home of their own in
    # the temporary folder: the scratch folder stays empty, as the platform checks.
    with tempfile.TemporaryDirectory(prefix="home-") as home:
        os.environ["HOME"] = home
        os.environ["HF_HOME"] = os.path.join(home, ".cache", "huggingface")
        run(args.directory, _sender(out))
    out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
