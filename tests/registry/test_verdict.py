"""The verdict of a validation is the platform's: the worker's answer (its outputs, in
frames) is parsed strictly and compared with the examples here, as strictly as before."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from modelport.manifest import parse_manifest
from modelport.registry.verdict import AnswerError, judge
from modelport.sandbox import frames
from tests.registry.helpers import add_one_example, manifest_for, onnx_bytes

MANIFEST = parse_manifest(manifest_for(onnx_bytes(), examples=[add_one_example()]))
RIGHT = np.array([[2.0, 3.0, 4.0, 5.0]], dtype=np.float32)
LOADED = {"loaded": True, "load_ms": 3.5}


def answer(*parts: tuple[dict[str, Any], dict[str, Any]]) -> bytes:
    return b"".join(bytes(p) for header, tensors in parts for p in frames.encode(header, tensors))


def example(y: Any, **extra: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    return {"example": 0, "ms": 1.0, **extra}, ({"y": y} if y is not None else {})


def test_outputs_that_match_pass() -> None:
    verdict = judge(MANIFEST, answer((LOADED, {}), example(RIGHT)))
    assert (verdict.status, verdict.load_ms) == ("passed", 3.5)
    assert verdict.examples == [{"index": 0, "passed": True, "problems": [], "ms": 1.0}]


@pytest.mark.parametrize(
    ("y", "problem"),
    [
        (RIGHT + 1e-3, "max abs difference"),
        (RIGHT.reshape(4, 1), "shape"),
        (np.array([[b"2", b"3", b"4", b"5"]], dtype=object), "not numbers"),
        (None, "missing"),
    ],
)
def test_outputs_that_differ_fail_the_example(y: Any, problem: str) -> None:
    verdict = judge(MANIFEST, answer((LOADED, {}), example(y)))
    assert verdict.status == "examples_failed"
    assert problem in verdict.examples[0]["problems"][0]


def test_an_example_that_raised_fails_with_its_error() -> None:
    verdict = judge(MANIFEST, answer((LOADED, {}), example(None, error="boom")))
    assert verdict.status == "examples_failed"
    assert verdict.examples[0]["problems"] == ["boom"]


def test_the_workers_own_failure_is_believed() -> None:
    failed = {"failed": "load_failed", "detail": "not an onnx graph"}
    verdict = judge(MANIFEST, answer((failed, {})))
    assert (verdict.status, verdict.detail) == ("load_failed", "not an onnx graph")


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"", "ended before the model was loaded"),
        (answer((LOADED, {})), "ended before example 0 of 1"),
        (answer((LOADED, {}), example(RIGHT))[:-3], "middle of a frame"),
        (answer((LOADED, {}), example(RIGHT)) + b"x", "1 byte(s) after the end"),
        (b"junk that is not a frame", "malformed answer"),
        (answer(({"status": "passed"}, {})), "unexpected first frame"),
        (answer((LOADED | {"passed": True}, {})), "unexpected first frame"),
        (answer((LOADED, {}), example(RIGHT, passed=True)), "unexpected frame for example 0"),
        (answer((LOADED, {}), ({"example": 1, "ms": 1.0}, {"y": RIGHT})), "for example 0"),
        (answer((LOADED, {}), ({"example": 0, "ms": -1}, {"y": RIGHT})), "negative"),
        (answer((LOADED, {}), ({"example": 0, "ms": 1.0}, {"y": RIGHT, "z": RIGHT})), "'z'"),
        (answer(({"failed": "passed", "detail": ""}, {})), "unexpected failure frame"),
    ],
)
def test_an_answer_outside_the_protocol_is_refused(raw: bytes, reason: str) -> None:
    with pytest.raises(AnswerError) as caught:
        judge(MANIFEST, raw)
    assert reason in str(caught.value)


def test_generated_tokens_are_compared_token_for_token() -> None:
    chat = manifest_for(onnx_bytes(), fmt="transformers", examples=[])
    chat["runtime"] = {"task": "chat"}
    chat["examples"] = [
        {
            "inputs": [{"name": "prompt", "datatype": "BYTES", "shape": [1], "data": ["Once"]}],
            "outputs": [
                {"name": "tokens", "datatype": "INT64", "shape": [3], "data": [7, 8, 9]},
                {"name": "text", "datatype": "BYTES", "shape": [1], "data": [" upon a"]},
            ],
        }
    ]
    manifest = parse_manifest(chat)
    text = np.array([b" upon a"], dtype=object)

    def verdict_on(tokens: list[int], said: Any = text) -> Any:
        outputs = {"tokens": np.array(tokens, dtype=np.int64), "text": said}
        return judge(manifest, answer((LOADED, {}), ({"example": 0, "ms": 1.0}, outputs)))

    pytest.importorskip("transformers")
    assert verdict_on([7, 8, 9]).status == "passed"
    off = verdict_on([7, 8, 10])
    assert off.status == "examples_failed"
    assert "first difference at 2" in off.examples[0]["problems"][0]
    other_text = verdict_on([7, 8, 9], np.array([b" upon b"], dtype=object))
    assert "output 'text'" in other_text.examples[0]["problems"][0]
