"""SmolLM2-135M-Instruct (Q4_1 GGUF, shipped on PyPI) through the generative plugin."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from modelport.runtime.formats.transformers.generative import TransformersGenerativeFormat
from modelport.runtime.formats.transformers.gguf_header import quantization, read_metadata
from modelport.runtime.formats.transformers.greedy import generate_greedy
from modelport.runtime.types import ChatMessage
from tests.runtime.formats.transformers.manifests import generative_manifest
from tests.runtime.formats.transformers.packages import smollm2_gguf

pytestmark = pytest.mark.heavy  # minutes of work: started first in a parallel run


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    # The cache hands files under content-addressed names: the manifest path differs.
    return {"SmolLM2-135M-Instruct.Q4_1.gguf": smollm2_gguf()}


def test_the_header_says_architecture_context_and_quantization() -> None:
    meta = read_metadata(smollm2_gguf(), {"general.architecture", "llama.context_length"})
    assert meta == {"general.architecture": "llama", "llama.context_length": 8192}
    assert quantization(smollm2_gguf()) == "Q4_1"


@pytest.mark.slow  # de-quantizing 135M parameters from GGUF: a minute on a busy machine
def test_smollm2_loads_from_gguf_and_chats_greedily(files: dict[str, Path]) -> None:
    plugin = TransformersGenerativeFormat(device="cpu")
    loaded: Any = plugin.load_model(files, generative_manifest(files))
    assert type(loaded.model).__name__ == "LlamaForCausalLM"
    assert loaded.model.dtype == torch.float32
    assert loaded.parameters == 134_515_008
    assert loaded.tokenizer.chat_template  # the GGUF file carries it
    messages = (ChatMessage("user", "What is the capital of France?"),)
    got = generate_greedy(loaded.model, loaded.tokenizer, messages=messages, max_tokens=6)
    assert len(got.tokens) == 6 and "Paris" in got.text
    # The same prompt through transformers' own generate gives the same tokens.
    rendered = loaded.tokenizer.apply_chat_template(
        [{"role": "user", "content": messages[0].content}],
        add_generation_prompt=True,
        tokenize=False,
    )
    ids = loaded.tokenizer(rendered, add_special_tokens=False, return_tensors="pt")["input_ids"]
    out = loaded.model.generate(
        ids,
        attention_mask=torch.ones_like(ids),
        max_new_tokens=6,
        do_sample=False,
        temperature=None,
        top_p=None,
        top_k=None,
        pad_token_id=loaded.tokenizer.eos_token_id,
    )
    assert out[0, ids.shape[1] :].tolist() == list(got.tokens)
