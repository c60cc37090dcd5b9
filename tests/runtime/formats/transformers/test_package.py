"""What a transformers package may hold: refusals before transformers reads a byte."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from modelport.errors import ModelportError
from modelport.runtime.formats.transformers.package import (
    check_package,
    inspect_layout,
    is_causal_lm,
)
from tests.runtime.formats.transformers.packages import copy_package, minilm_dir, package_files


def _code(exc: pytest.ExceptionInfo[ModelportError]) -> str | None:
    return exc.value.code


@pytest.fixture
def llama(tiny_llama: Path, tmp_path: Path) -> Path:
    return copy_package(tiny_llama, tmp_path / "pkg")


def test_a_tiny_llama_and_minilm_pass_and_are_sorted_by_role(tiny_llama: Path) -> None:
    layout = check_package(package_files(tiny_llama))
    assert layout.config == "config.json" and layout.safetensors == ("model.safetensors",)
    assert "tokenizer.json" in layout.tokenizer and "chat_template.jinja" in layout.tokenizer
    assert not layout.is_gguf and not layout.has_sentence_modules
    minilm = check_package(package_files(minilm_dir()))
    assert minilm.has_sentence_modules and "1_Pooling/config.json" in minilm.sentence
    # The README and data_config.json are never shown to transformers.
    assert "README.md" not in minilm.loadable and "data_config.json" not in minilm.loadable


@pytest.mark.parametrize(
    "name", ["pytorch_model.bin", "model.pt", "weights.pth", "x.ckpt", "tok.pkl", "1_Dense/m.BIN"]
)
def test_pickle_weights_are_refused_whatever_else_the_package_holds(name: str) -> None:
    paths = ["config.json", "model.safetensors", "tokenizer.json", name]
    with pytest.raises(ModelportError) as exc:
        inspect_layout(paths)
    assert _code(exc) == "unsafe_content"
    assert name in exc.value.message


def test_python_code_is_refused() -> None:
    with pytest.raises(ModelportError) as exc:
        inspect_layout(["config.json", "model.safetensors", "modeling_evil.py"])
    assert _code(exc) == "unsafe_content"


@pytest.mark.parametrize("where", ["config.json", "tokenizer_config.json"])
def test_an_auto_map_is_refused(llama: Path, where: str) -> None:
    path = llama / where
    data = json.loads(path.read_text())
    data["auto_map"] = {"AutoModelForCausalLM": "modeling_evil.EvilForCausalLM"}
    path.write_text(json.dumps(data))
    with pytest.raises(ModelportError) as exc:
        check_package(package_files(llama))
    assert _code(exc) == "unsafe_content" and "auto_map" in exc.value.message


def test_an_unknown_model_type_is_refused(llama: Path) -> None:
    data = json.loads((llama / "config.json").read_text())
    data["model_type"] = "evilnet"
    (llama / "config.json").write_text(json.dumps(data))
    with pytest.raises(ModelportError) as exc:
        check_package(package_files(llama))
    assert _code(exc) == "unsupported_architecture"


def test_an_architecture_transformers_does_not_ship_is_refused(llama: Path) -> None:
    data = json.loads((llama / "config.json").read_text())
    data["architectures"] = ["EvilLlamaForCausalLM"]
    (llama / "config.json").write_text(json.dumps(data))
    with pytest.raises(ModelportError) as exc:
        check_package(package_files(llama))
    assert _code(exc) == "unsupported_architecture" and "EvilLlamaForCausalLM" in exc.value.message


@pytest.mark.parametrize(
    ("paths", "why"),
    [
        (["config.json", "tokenizer.json"], "needs weights"),
        (["model.safetensors", "tokenizer.json"], "needs a config.json"),
        (["config.json", "model.safetensors", "m.gguf"], "not both"),
        (["a.gguf", "b.gguf"], "one GGUF file"),
    ],
)
def test_packages_without_usable_weights_are_invalid(paths: list[str], why: str) -> None:
    with pytest.raises(ModelportError) as exc:
        inspect_layout(paths)
    assert _code(exc) == "invalid_package" and why in exc.value.message


def test_a_gguf_file_alone_is_a_package() -> None:
    layout = inspect_layout(["SmolLM2.Q4_1.gguf", "README.md"])
    assert layout.gguf == "SmolLM2.Q4_1.gguf" and layout.loadable == ("SmolLM2.Q4_1.gguf",)


def test_causal_lms_and_encoders_are_told_apart() -> None:
    assert is_causal_lm("llama", ["LlamaForCausalLM"])
    assert not is_causal_lm("bert", ["BertModel"])
    assert not is_causal_lm("llama", ["LlamaModel"])
