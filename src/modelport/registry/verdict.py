"""The verdict of a validation, computed on the platform's side from what the sandboxed
validation worker (``validation_worker``) answered: the outputs of each example, never
its opinion of them.

The answer is the worker's standard output, a pipe read up to ``ANSWER_LIMIT_BYTES``:
frames (``modelport.sandbox.frames``), in this order and nothing else::

    {"loaded": true, "load_ms": float}
        or {"failed": "load_failed" | "out_of_memory", "detail": str}, and the end;
    then for each example, in order:
    {"example": index, "ms": float} with the example's expected outputs by name,
        or {"example": index, "ms": float, "error": str} (running it raised),
        or {"failed": "out_of_memory", "detail": str}, and the end.

An answer that is malformed, has bytes after its end, or ends early raises
``AnswerError``; the caller turns it into a failed validation.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from modelport.manifest import Example, Manifest
from modelport.runtime.examples import ExampleResult, compare_outputs
from modelport.sandbox import frames

ANSWER_LIMIT_BYTES = 64 << 20
"""The most a validation worker may write on its standard output (it is killed past it)."""
_FAILURES = frozenset({"load_failed", "out_of_memory"})
_DETAIL_CHARS = 2000


class AnswerError(ValueError):
    """The worker's answer is not one the protocol allows; the message says why."""

    def __init__(self, message: str, *, truncated: bool = False) -> None:
        super().__init__(message)
        self.truncated = truncated
        """The answer was well formed so far, but ended early."""


@dataclass
class Verdict:
    """What the answer says, judged: ``status`` is ``passed`` or a failure cause."""

    status: str
    detail: str
    load_ms: float | None = None
    examples: list[dict[str, Any]] = field(default_factory=list)


def runs_generatively(manifest: Manifest) -> bool:
    """Whether the version's examples are decoded by its format's generative plugin (its
    ``runtime.task`` is generative and such a plugin is installed), not run as tensors."""
    from modelport.runtime.engines import GENERATIVE_TASKS
    from modelport.runtime.formats.registry import GENERATIVE

    found = GENERATIVE.get(manifest.format)
    return manifest.runtime.get("task") in GENERATIVE_TASKS and found is not None and found[1]()


def judge(manifest: Manifest, answer: bytes) -> Verdict:
    """The verdict on ``answer`` for the manifest's examples; raises ``AnswerError``."""
    stream = io.BytesIO(answer)

    def read_exact(n: int) -> bytes:
        data = stream.read(n)
        if len(data) != n:
            raise AnswerError(
                f"the answer ends in the middle of a frame ({len(answer)} bytes)", truncated=True
            )
        return data

    def next_frame(what: str) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        if stream.tell() == len(answer):
            raise AnswerError(f"the answer ended before {what}", truncated=True)
        try:
            return frames.decode(read_exact)
        except frames.FrameError as exc:
            raise AnswerError(f"malformed answer: {exc}") from None

    header, tensors = next_frame("the model was loaded")
    if "failed" in header:
        verdict = _failure(header, tensors)
    else:
        if set(header) != {"loaded", "load_ms"} or header["loaded"] is not True or tensors:
            raise AnswerError(f"unexpected first frame: {_keys(header)}")
        verdict = Verdict("passed", "", load_ms=_duration(header, "load_ms"))
        for index, example in enumerate(manifest.examples):
            header, tensors = next_frame(f"example {index} of {len(manifest.examples)}")
            if "failed" in header:
                verdict = _failure(header, tensors, load_ms=verdict.load_ms)
                break
            verdict.examples.append(_judge_example(manifest, example, index, header, tensors))
        else:
            failed = sum(not e["passed"] for e in verdict.examples)
            total = len(manifest.examples)
            if failed:
                verdict.status = "examples_failed"
                verdict.detail = f"{failed} of {total} example(s) failed"
            else:
                verdict.detail = f"{total} example(s) passed"
    left = len(answer) - stream.tell()
    if left:
        raise AnswerError(f"{left} byte(s) after the end of the answer")
    return verdict


def _failure(
    header: Mapping[str, Any], tensors: Mapping[str, Any], *, load_ms: float | None = None
) -> Verdict:
    if (
        set(header) != {"failed", "detail"}
        or header["failed"] not in _FAILURES
        or not isinstance(header["detail"], str)
        or tensors
    ):
        raise AnswerError(f"unexpected failure frame: {_keys(header)}")
    return Verdict(str(header["failed"]), header["detail"][:_DETAIL_CHARS], load_ms=load_ms)


def _judge_example(
    manifest: Manifest,
    example: Example,
    index: int,
    header: Mapping[str, Any],
    tensors: Mapping[str, np.ndarray],
) -> dict[str, Any]:
    keys = set(header)
    if keys not in ({"example", "ms"}, {"example", "ms", "error"}) or header["example"] != index:
        raise AnswerError(f"unexpected frame for example {index}: {_keys(header)}")
    ms = _duration(header, "ms")
    wanted = {t.name for t in example.outputs}
    extra = sorted(set(tensors) - wanted)
    if extra:
        raise AnswerError(f"example {index}: outputs the example does not expect: {extra}")
    if "error" in header:
        if not isinstance(header["error"], str) or tensors:
            raise AnswerError(f"example {index}: malformed error frame")
        result = ExampleResult(index, False, [header["error"][:_DETAIL_CHARS]])
    else:
        result = _compare(manifest, example, tensors, index)
    return {**result.as_dict(), "ms": ms}


def _compare(
    manifest: Manifest, example: Example, outputs: Mapping[str, np.ndarray], index: int
) -> ExampleResult:
    """The example's outputs compared with what it expects, as strictly as a model in this
    process would be: within tolerance, or token for token for a generative version."""
    try:
        if runs_generatively(manifest):
            from modelport.runtime.formats.transformers.examples import compare_generated

            return compare_generated(example, outputs, index)
        return compare_outputs(example, outputs, index)
    except Exception as exc:  # an example or an output that cannot be compared fails
        message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
        return ExampleResult(index, False, [message[:_DETAIL_CHARS]])


def _duration(header: Mapping[str, Any], key: str) -> float:
    value = header[key]
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise AnswerError(f"'{key}' is not a number")
    if value < 0:
        raise AnswerError(f"'{key}' is negative")
    return float(value)


def _keys(header: Mapping[str, Any]) -> str:
    return ", ".join(sorted(str(k) for k in header))[:200] or "(empty)"
