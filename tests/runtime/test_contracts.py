"""Which runtime contract serves a version: from its manifest's format and its task."""

from __future__ import annotations

import pytest

from modelport.errors import InvalidInput, Unprocessable
from modelport.runtime.engines import choose_contract
from modelport.runtime.types import Contract

TENSOR = {"onnx", "both"}
GENERATIVE = {"toy-generative", "both"}


@pytest.mark.parametrize(
    ("fmt", "task", "contract"),
    [
        ("onnx", "classification", Contract.TENSOR),
        ("onnx", "text-generation", Contract.TENSOR),  # a tensor-only format stays one
        ("toy-generative", "", Contract.GENERATIVE),
        ("toy-generative", "embeddings", Contract.GENERATIVE),
        ("both", "text-generation", Contract.GENERATIVE),
        ("both", "chat", Contract.GENERATIVE),
        ("both", "embeddings", Contract.TENSOR),
        ("both", "", Contract.TENSOR),
    ],
)
def test_the_format_and_the_task_choose_the_contract(
    fmt: str, task: str, contract: Contract
) -> None:
    chosen = choose_contract(fmt, task, tensor_formats=TENSOR, generative_formats=GENERATIVE)
    assert chosen is contract


def test_an_unknown_format_has_no_runtime() -> None:
    with pytest.raises(Unprocessable) as caught:
        choose_contract("gguf", "chat", tensor_formats=TENSOR, generative_formats=GENERATIVE)
    assert caught.value.code == "unsupported_format"
    assert "both, onnx, toy-generative" in caught.value.message


def test_an_unsafe_format_is_refused_whatever_is_registered() -> None:
    with pytest.raises(InvalidInput) as caught:
        choose_contract("pickle", "", tensor_formats={"pickle"}, generative_formats=set())
    assert caught.value.code == "unsafe_format"
