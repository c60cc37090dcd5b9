"""Causal LMs: loading a tiny random Llama (safetensors) and the engine's construction."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from modelport.errors import ModelportError
from modelport.runtime.formats.registry import generative_formats
from modelport.runtime.formats.transformers.device import resolve_device, resolve_dtype
from modelport.runtime.formats.transformers.embedding import TransformersEmbeddingFormat
from modelport.runtime.formats.transformers.generative import TransformersGenerativeFormat
from modelport.runtime.formats.transformers.greedy import generate_greedy
from modelport.runtime.types import ChatMessage
from tests.runtime.formats.transformers.manifests import generative_manifest
from tests.runtime.formats.transformers.packages import minilm_dir, package_files


@pytest.fixture(scope="module")
def loaded(tiny_llama: Path) -> Any:
    return TransformersGenerativeFormat(device="cpu").load_model(package_files(tiny_llama), None)  # type: ignore[arg-type]


def test_the_tiny_llama_loads_on_the_cpu_in_float32(loaded: Any) -> None:
    assert type(loaded.model).__name__ == "LlamaForCausalLM"
    assert loaded.model.dtype == torch.float32 and loaded.device == "cpu"
    assert not loaded.model.training
    assert loaded.tokenizer.chat_template
    assert loaded.parameters == sum(p.numel() for p in loaded.model.parameters()) > 0


def test_greedy_decoding_is_what_transformers_generate_produces(loaded: Any) -> None:
    ids = loaded.tokenizer("hello world", return_tensors="pt")["input_ids"]
    reference = loaded.model.generate(
        ids,
        attention_mask=torch.ones_like(ids),
        max_new_tokens=6,
        do_sample=False,
        pad_token_id=loaded.tokenizer.eos_token_id,
    )[0, ids.shape[1] :].tolist()
    eos = loaded.tokenizer.eos_token_id
    expected = reference[: reference.index(eos)] if eos in reference else reference
    got = generate_greedy(loaded.model, loaded.tokenizer, prompt="hello world", max_tokens=6)
    assert list(got.tokens) == expected and got.prompt_tokens == ids.shape[1]
    again = generate_greedy(loaded.model, loaded.tokenizer, prompt="hello world", max_tokens=6)
    assert again == got


def test_a_chat_is_rendered_with_the_model_template(loaded: Any) -> None:
    messages = (ChatMessage("user", "what is two plus two?"),)
    got = generate_greedy(loaded.model, loaded.tokenizer, messages=messages, max_tokens=3)
    rendered = "<s>user: what is two plus two?\n<s>assistant:"
    assert got.prompt_tokens == len(
        loaded.tokenizer(rendered, add_special_tokens=False)["input_ids"]
    )


def test_the_embedding_plugin_refuses_a_causal_lm(tiny_llama: Path) -> None:
    manifest = generative_manifest(package_files(tiny_llama))
    with pytest.raises(ModelportError) as exc:
        TransformersEmbeddingFormat(device="cpu").load(package_files(tiny_llama), manifest)
    assert exc.value.code == "unsupported_task"


def test_the_generative_plugin_refuses_an_encoder() -> None:
    with pytest.raises(ModelportError) as exc:
        TransformersGenerativeFormat(device="cpu").load_model(package_files(minilm_dir()), None)  # type: ignore[arg-type]
    assert exc.value.code == "unsupported_task"


def test_load_builds_the_engine_with_the_budget_and_context(tiny_llama: Path) -> None:
    from modelport.runtime.generative.engine import EngineConfig
    from modelport.runtime.generative.metrics import GenerationMetrics
    from modelport.runtime.generative.torch_engine import TorchGenerativeEngine

    files = package_files(tiny_llama)
    metrics = GenerationMetrics()
    plugin = TransformersGenerativeFormat(
        device="cpu", kv_cache_bytes=1 << 20, max_running=4, metrics=metrics
    )
    engine: Any = plugin.load(files, generative_manifest(files), name="acme/tiny:1")
    try:
        assert isinstance(engine, TorchGenerativeEngine) and engine.model.dtype == torch.float32
        assert engine.config == EngineConfig(
            kv_budget_bytes=1 << 20, context_length=128, max_running=4
        )
        assert engine.name == "acme/tiny:1" and engine.metrics_holder is metrics
    finally:
        engine.unload()
    declared = generative_manifest(files, kv_cache_bytes=1 << 16, context_length=64)
    engine = plugin.load(files, declared)
    try:
        assert engine.config.kv_budget_bytes == 1 << 16 and engine.config.context_length == 64
    finally:
        engine.unload()


def test_memory_is_weights_plus_the_kv_budget(tiny_llama: Path) -> None:
    files = package_files(tiny_llama)
    plugin = TransformersGenerativeFormat(kv_cache_bytes=1 << 20)
    weights = (tiny_llama / "model.safetensors").stat().st_size
    overhead = 64 << 20
    assert plugin.estimate_memory(generative_manifest(files)) == weights + (1 << 20) + overhead
    counted = generative_manifest(files, parameters=1000, kv_cache_bytes=5000)
    assert plugin.estimate_memory(counted) == 4000 + 5000 + overhead
    with pytest.raises(ModelportError) as exc:
        plugin.estimate_memory(generative_manifest(files, kv_cache_bytes=-1))
    assert exc.value.code == "invalid_manifest"


def test_device_and_dtype_settings() -> None:
    assert resolve_device("cpu") == "cpu"
    assert resolve_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")
    assert resolve_dtype("auto", "cpu") == torch.float32
    assert resolve_dtype("bfloat16", "cpu") == torch.bfloat16
    if not torch.cuda.is_available():
        with pytest.raises(ModelportError) as exc:
            resolve_device("cuda")
        assert exc.value.code == "device_unavailable"
    with pytest.raises(ModelportError):
        resolve_dtype("float8", "cpu")


def test_the_generative_plugins_installed_get_their_options() -> None:
    plugins = generative_formats({"transformers": {"device": "cpu", "kv_cache_bytes": 7}})
    plugin = plugins["transformers"]
    assert isinstance(plugin, TransformersGenerativeFormat)
    assert plugin.device_setting == "cpu" and plugin.kv_cache_bytes == 7
