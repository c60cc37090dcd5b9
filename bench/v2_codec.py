"""CPU per call of the /v2 JSON codec, in process: parse, validate, encode.

    .venv/bin/python bench/v2_codec.py                     # against 403d79b, before the fast paths
    .venv/bin/python bench/v2_codec.py --against HEAD~1    # against another revision (needs git)
    .venv/bin/python bench/v2_codec.py --against none      # only the general path forced

The request is serving_bench's single-row one (one FP32 input of 64 values,
JSON only), the response one FP32 output of 4 values. Each figure is
``time.thread_time`` per call: the best of ``--repeat`` runs of ``--number``
calls, with the range; the variants take turns within each run, so they share
the machine's state. Two baselines, in the same run:

- *general*: parse with the decode fast path off and the body taking the
  memoryview route of bodies with binary data (validate and encode have no
  separate general path);
- *REV*: ``codec.py``, ``validate.py`` and ``tensors.py`` as they were at a git
  revision, loaded beside the current ones.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
import types
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import numpy as np
import serving_bench  # beside this script

from modelport.api.v2 import codec, validate
from modelport.manifest import TensorSpec
from modelport.testing.switches import general_path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BEFORE = "403d79b"
"""The last revision before the codec's fast paths."""

SPECS_IN = [TensorSpec(name="features", datatype="FP32", shape=[-1, 64])]
SPECS_OUT = [TensorSpec(name="probabilities", datatype="FP32", shape=[-1, 4])]
MAX_ELEMENTS = 1 << 26
MAX_BYTES = 64 << 20


def _module_at(rev: str, path: str, name: str) -> types.ModuleType:
    source = subprocess.run(
        ["git", "show", f"{rev}:{path}"], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout
    module = types.ModuleType(name)
    module.__file__ = f"{rev}:{path}"
    sys.modules[name] = module  # dataclasses and annotations look their module up
    exec(compile(source, module.__file__, "exec"), module.__dict__)
    return module


def load_revision(rev: str) -> tuple[types.ModuleType, types.ModuleType]:
    """That revision's codec (wired to that revision's tensors) and validate."""
    current = sys.modules["modelport.runtime.tensors"]
    old_tensors = _module_at(rev, "src/modelport/runtime/tensors.py", "baseline_tensors")
    sys.modules["modelport.runtime.tensors"] = old_tensors  # for the codec's import
    try:
        old_codec = _module_at(rev, "src/modelport/api/v2/codec.py", "baseline_codec")
    finally:
        sys.modules["modelport.runtime.tensors"] = current
    old_validate = _module_at(rev, "src/modelport/api/v2/validate.py", "baseline_validate")
    return old_codec, old_validate


GENERAL = "general"


def cpu_us(call: Callable[[], Any], number: int, label: str) -> float:
    # The switch is thrown once around the loop: its own cost is not the path's.
    with general_path() if label == GENERAL else nullcontext():
        start = time.thread_time()
        for _ in range(number):
            call()
        return (time.thread_time() - start) / number * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--against", default=BEFORE, help="git revision, or 'none'")
    parser.add_argument("--number", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    row = np.random.default_rng(0).standard_normal(serving_bench.FEATURES).astype(np.float32)
    body = serving_bench.request_body(row)
    as_view = bytearray(body)
    outputs = {"probabilities": np.random.default_rng(1).random((1, 4)).astype(np.float32)}

    def parse_now() -> Any:
        return codec.parse_infer_request(body, None, max_elements=MAX_ELEMENTS)

    def parse_general() -> Any:  # timed inside general_path(), see GENERAL
        return codec.parse_infer_request(as_view, None, max_elements=MAX_ELEMENTS)

    parsed = parse_now()
    variants: dict[str, dict[str, Callable[[], Any]]] = {
        "parse": {"now": parse_now, GENERAL: parse_general},
        "validate": {
            "now": lambda: validate.validate_request(
                parsed, SPECS_IN, SPECS_OUT, max_input_bytes=MAX_BYTES
            )
        },
        "encode": {
            "now": lambda: codec.encode_infer_response(
                outputs, model_name="acme/mlp", model_version="1"
            )
        },
    }
    if args.against != "none":
        old_codec, old_validate = load_revision(args.against)
        old_parsed = old_codec.parse_infer_request(body, None, max_elements=MAX_ELEMENTS)
        variants["parse"][args.against] = lambda: old_codec.parse_infer_request(
            body, None, max_elements=MAX_ELEMENTS
        )
        variants["validate"][args.against] = lambda: old_validate.validate_request(
            old_parsed, SPECS_IN, SPECS_OUT, max_input_bytes=MAX_BYTES
        )
        variants["encode"][args.against] = lambda: old_codec.encode_infer_response(
            outputs, model_name="acme/mlp", model_version="1"
        )
    _check_same_answers(variants)

    print(f"thread CPU per call, best of {args.repeat} x {args.number} (range)")
    for op, calls in variants.items():
        runs: dict[str, list[float]] = {label: [] for label in calls}
        for _ in range(args.repeat):
            for label, call in calls.items():
                runs[label].append(cpu_us(call, args.number, label))
        now = min(runs["now"])
        cells = [f"{op:<9} now {now:6.2f} us ({now:.2f}-{max(runs['now']):.2f})"]
        for label, times in runs.items():
            if label != "now":
                best = min(times)
                ratio = now / best
                cells.append(
                    f"{label} {best:6.2f} us ({best:.2f}-{max(times):.2f}) ratio {ratio:.2f}"
                )
        print(" | ".join(cells))


def _check_same_answers(variants: dict[str, dict[str, Callable[[], Any]]]) -> None:
    """Every variant must answer alike, or the comparison means nothing."""
    arrays = []
    for label, call in variants["parse"].items():
        with general_path() if label == GENERAL else nullcontext():
            arrays.append(call().inputs[0].data)
    for array in arrays[1:]:
        assert array.dtype == arrays[0].dtype and array.tobytes() == arrays[0].tobytes()
    bodies = {call().body for call in variants["encode"].values()}
    assert len(bodies) == 1, bodies


if __name__ == "__main__":
    main()
