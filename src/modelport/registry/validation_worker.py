"""Load a version and run its examples, in a process of its own.

``python -m modelport.registry.validation_worker DIR``, in the sandbox
(``modelport.sandbox``: its launcher set the limits and the system-call filter first).

``DIR`` holds ``manifest.json`` and the verified files under ``files/``. A generative
version (its ``runtime.task`` is ``chat``, ``completions`` or ``text-generation``) is
loaded by its format's generative plugin, whose examples are decoded greedily from a
fixed seed and compared token for token; any other version is loaded as a tensor
model and its outputs compared within the example's tolerance. A version with processing
code (``manifest.processing``) has each example run through it, in this process:
preprocess, the model, postprocess; a failure of the code fails that example. The result
is written to ``DIR/result.json`` (never stdout, where native libraries may print)::

    {"status": "passed" | "examples_failed" | "load_failed" | "out_of_memory",
     "detail": str, "load_ms": float, "examples": [{"index", "passed", "problems", "ms"}],
     "processing"?: {"preprocess", "postprocess"} (the entry points the examples ran through)}
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

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


def run(directory: Path) -> dict[str, Any]:
    """Load the model in ``directory`` and run every example; never raises."""
    result: dict[str, Any] = {"status": "load_failed", "detail": "", "load_ms": None}
    result["examples"] = []
    start = time.perf_counter()
    try:
        from modelport.manifest import Manifest

        manifest = Manifest.model_validate_json((directory / "manifest.json").read_bytes())
        files = {f.path: directory / "files" / f.path for f in manifest.files}
        if manifest.processing is not None:
            result["processing"] = {
                "preprocess": manifest.processing.preprocess,
                "postprocess": manifest.processing.postprocess,
            }
        run_example = _example_runner(files, manifest, directory / "files")
        result["load_ms"] = _ms(start)
        failed = 0
        for index, example in enumerate(manifest.examples):
            started = time.perf_counter()
            try:
                outcome = run_example(example, index).as_dict()
            except MemoryError:
                raise
            except Exception as exc:  # a model error fails this example, not the worker
                if _is_oom(_describe(exc)):
                    raise MemoryError(_describe(exc)) from None
                outcome = {"index": index, "passed": False, "problems": [_describe(exc)]}
            outcome["ms"] = _ms(started)
            result["examples"].append(outcome)
            failed += not outcome["passed"]
        if failed:
            result["status"] = "examples_failed"
            result["detail"] = f"{failed} of {len(manifest.examples)} example(s) failed"
        else:
            result["status"] = "passed"
            result["detail"] = f"{len(manifest.examples)} example(s) passed"
    except MemoryError as exc:
        result["status"] = "out_of_memory"
        result["detail"] = "ran out of memory under the validation memory limit: " + _describe(exc)
    except Exception as exc:  # load errors of any kind are the model's fault
        message = _describe(exc)
        result["status"] = "out_of_memory" if _is_oom(message) else "load_failed"
        result["detail"] = message
    return result


def _example_runner(
    files: dict[str, Path], manifest: Any, package: Path
) -> Callable[[Any, int], Any]:
    """Load the model; answer what runs one example against it. A generative version
    (``runtime.task`` a generative task, of a format with a generative plugin) has its
    examples decoded greedily by that plugin; any other is loaded as a tensor model."""
    from modelport.runtime.engines import GENERATIVE_TASKS
    from modelport.runtime.examples import run_example
    from modelport.runtime.formats import get_format
    from modelport.runtime.formats.registry import generative_formats
    from modelport.runtime.outputs import DeclaredOutputs

    options = VALIDATION_OPTIONS.get(manifest.format)
    if manifest.runtime.get("task") in GENERATIVE_TASKS:
        plugin = generative_formats({manifest.format: options or {}}).get(manifest.format)
        runner = getattr(plugin, "example_runner", None)
        if runner is not None:
            examples: Callable[[Any, int], Any] = runner(files, manifest)
            return examples
    # Examples see what callers will: the declared outputs, in declared datatypes.
    runtime = manifest.for_runtime()
    model: Any = DeclaredOutputs(
        get_format(manifest.format, options).load(files, runtime), runtime.outputs
    )
    if manifest.processing is not None:
        model = _Processed(model, manifest, package)
    return functools.partial(run_example, model)


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="modelport.registry.validation_worker")
    parser.add_argument("directory", type=Path)
    args = parser.parse_args(argv)
    result = run(args.directory)
    tmp = args.directory / "result.json.tmp"
    tmp.write_text(json.dumps(result))
    tmp.replace(args.directory / "result.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
