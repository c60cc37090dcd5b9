"""The batching engine on llama.cpp kernels: greedy answers equal llama.cpp's own,
batches of streams, cancel, preemption, the prefix cache, samplers and grammars."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from modelport.errors import InvalidInput, Unavailable
from modelport.runtime.generative.engine import BatchingEngine
from modelport.runtime.generative.llama.kernels import MIN_BURST_PREFIX
from modelport.runtime.types import ChatMessage, GenerationRequest, Priority
from tests.runtime.generative.helpers import wait_until
from tests.runtime.llama.conftest import THREADS, EngineFactory, generate, greedy

PROMPT = "The capital of France is"
SYSTEM = ChatMessage(
    "system",
    "You are a careful assistant for a marketplace of models. You answer in one short"
    " sentence, you never invent facts, and you say when you do not know. You are polite"
    " and brief, you use plain words, and you never answer a question you were not asked.",
)
LONG_SYSTEM = ChatMessage(
    "system",
    SYSTEM.content
    + " When a question has several parts, you answer each part in the order it was asked.",
)
"""Long enough that chats admitted in one step share it ahead of the step (more than
``MIN_BURST_PREFIX`` tokens in common) as well as chats admitted one after another."""


def llama_cpp_greedy(gguf: Path, prompt: str, max_tokens: int) -> str:
    """What llama.cpp's own completion (the code its OpenAI server runs) answers."""
    import llama_cpp

    llm = llama_cpp.Llama(str(gguf), n_ctx=2048, n_threads=THREADS, verbose=False, flash_attn=True)
    try:
        out = llm.create_completion(prompt, max_tokens=max_tokens, temperature=0)
    finally:
        llm.close()
    return str(out["choices"][0]["text"])  # type: ignore[index]


def hits(engine: BatchingEngine) -> float:
    value = engine.metrics_holder.registry.get_sample_value(
        "modelport_generation_prefix_cache_hit_tokens_total",
        {"model": "acme/smol", "version": "1"},
    )
    return float(value or 0.0)


def test_a_greedy_completion_equals_llama_cpps_own(make_engine: EngineFactory, gguf: Path) -> None:
    engine = make_engine()
    assert engine.kind == "llama.cpp"
    assert generate(engine, greedy(PROMPT, 24)) == llama_cpp_greedy(gguf, PROMPT, 24)


def test_streams_decode_together_and_each_ends_at_its_bound(make_engine: EngineFactory) -> None:
    engine = make_engine()
    prompts = ["Once upon a time", "def fibonacci(n):", "Water boils at", PROMPT]

    async def run() -> list[tuple[str, int, str | None]]:
        async def one(prompt: str, bound: int) -> tuple[str, int, str | None]:
            chunks = [c async for c in engine.submit(greedy(prompt, bound))]
            return (
                "".join(c.text for c in chunks),
                sum(c.tokens for c in chunks),
                chunks[-1].finish_reason,
            )

        return list(await asyncio.gather(*(one(p, 8 + i) for i, p in enumerate(prompts))))

    answers = asyncio.run(run())
    for i, (text, tokens, finish) in enumerate(answers):
        assert text and tokens <= 8 + i
        assert finish == "length" or (finish == "stop" and tokens < 8 + i)
    wait_until(lambda: engine.scheduler.ledger.used_tokens == 0 and not engine.scheduler.running)


def test_a_cancelled_stream_frees_its_cells_at_once(make_engine: EngineFactory) -> None:
    engine = make_engine()

    async def run() -> None:
        generation = engine.submit(greedy(PROMPT, 400))
        async for _ in generation:
            break
        generation.cancel()

    asyncio.run(run())
    wait_until(lambda: not engine.scheduler.running)
    assert engine.scheduler.ledger.used_tokens == 0
    assert not engine.kernels._live  # type: ignore[attr-defined]


def end_now(engine: BatchingEngine) -> dict[str, float]:
    """A logit bias that makes the end-of-generation token the first one."""
    return {str(ends(engine)[0]): 100.0}


def test_a_preempted_sequence_resumes_with_its_greedy_answer(make_engine: EngineFactory) -> None:
    alone = generate(make_engine(), greedy(PROMPT, 40))
    # 256 KV cells: the offline sequence reserves 46 of them, an interactive one 224.
    engine = make_engine(kv_budget_bytes=256 * 23040, max_running=4)
    assert engine.kernels.capacity_tokens == 256

    async def run() -> tuple[str, str]:
        offline = engine.submit(
            GenerationRequest(
                prompt=PROMPT,
                max_tokens=40,
                parameters={"temperature": 0},
                priority=Priority.OFFLINE,
            )
        )
        texts: list[str] = []
        first = await anext(aiter(offline))
        texts.append(first.text)
        interactive = engine.submit(greedy("Once upon a time", 220, logit_bias=end_now(engine)))
        urgent = "".join([c.text async for c in interactive])
        texts += [c.text async for c in offline]
        return "".join(texts), urgent

    resumed, urgent = asyncio.run(run())
    assert engine.scheduler.preemptions >= 1
    assert urgent == ""  # it ended at once, by its bias
    assert resumed == alone


def test_chats_sharing_a_system_prompt_compute_it_once(make_engine: EngineFactory) -> None:
    engine = make_engine()
    questions = ["What is 2+2?", "Name a color.", "Who wrote Hamlet?", "What is water?"]

    async def run() -> list[str]:
        async def chat(question: str) -> str:
            request = GenerationRequest(
                prompt="",
                max_tokens=12,
                parameters={"temperature": 0},
                messages=(LONG_SYSTEM, ChatMessage("user", question)),
            )
            return "".join([c.text async for c in engine.submit(request)])

        return list(await asyncio.gather(*(chat(q) for q in questions)))

    answers = asyncio.run(run())
    assert all(answers)
    system_tokens = len(
        engine.encode(GenerationRequest(prompt="", max_tokens=1, messages=(LONG_SYSTEM,)))
    )
    assert system_tokens - 8 > MIN_BURST_PREFIX
    # Three of the four copied the shared part (the system turn at least), whether they
    # were admitted in one step (shared ahead of it) or one after another.
    assert hits(engine) >= 3 * (system_tokens - 8)


def test_a_repeated_prompt_reuses_its_kept_cells(make_engine: EngineFactory) -> None:
    engine = make_engine()
    request = GenerationRequest(
        prompt="", max_tokens=8, parameters={"temperature": 0}, messages=(SYSTEM,)
    )
    first = generate(engine, request)
    assert hits(engine) == 0
    assert generate(engine, request) == first
    prompt_tokens = len(engine.encode(request))
    assert hits(engine) == prompt_tokens - 1  # the last one computes the next token's logits


def test_kept_prefixes_give_their_cells_back_to_admissions(make_engine: EngineFactory) -> None:
    engine = make_engine(kv_budget_bytes=256 * 23040, max_running=2)
    generate(engine, greedy(PROMPT * 4, 8))
    kernels = engine.kernels
    wait_until(lambda: kernels.held_tokens > 0)  # type: ignore[attr-defined]
    held = kernels.held_tokens  # type: ignore[attr-defined]
    # A request reserving nearly every cell gets them: the kept prefix is dropped.
    generate(engine, greedy("Once upon a time", 250, logit_bias=end_now(engine)))
    assert kernels.held_tokens < held  # type: ignore[attr-defined]
    wait_until(lambda: engine.scheduler.ledger.used_tokens == 0)


def test_a_seed_makes_sampling_repeatable_and_choices_differ(make_engine: EngineFactory) -> None:
    engine = make_engine()
    sampled = GenerationRequest(
        prompt=PROMPT, max_tokens=16, parameters={"temperature": 1.0, "seed": 7}, n=2
    )

    async def run() -> list[str]:
        texts = ["", ""]
        async for chunk in engine.submit(sampled):
            texts[chunk.choice] += chunk.text
        return texts

    first, again = asyncio.run(run()), asyncio.run(run())
    assert first == again
    assert first[0] != first[1]


def test_penalties_and_logit_bias_change_the_answer(make_engine: EngineFactory) -> None:
    engine = make_engine()
    plain = generate(engine, greedy(PROMPT, 24))
    penalized = generate(engine, greedy(PROMPT, 24, frequency_penalty=2.0, presence_penalty=2.0))
    assert penalized != plain
    first_token = engine.encode(greedy(PROMPT + plain))[len(engine.encode(greedy(PROMPT)))]
    banned = generate(engine, greedy(PROMPT, 4, logit_bias={str(first_token): -100}))
    assert not banned.startswith(plain[:2])
    forced = engine.encode(greedy(" Rome"))[-1]
    assert generate(engine, greedy(PROMPT, 1, logit_bias={str(forced): 100})) == " Rome"


def test_json_answers_follow_the_grammar(make_engine: EngineFactory) -> None:
    engine = make_engine()
    chat = (ChatMessage("user", "Describe a cat."),)
    anything = GenerationRequest(
        prompt="",
        max_tokens=64,
        messages=chat,
        parameters={"temperature": 0, "response_format": {"type": "json_object"}},
    )
    assert isinstance(json.loads(generate(engine, anything)), dict)
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 12},
            "age": {"type": "integer"},
            "indoor": {"type": "boolean"},
        },
        "required": ["name", "age", "indoor"],
    }
    shaped = GenerationRequest(
        prompt="",
        max_tokens=64,
        messages=chat,
        parameters={"temperature": 0, "response_format": {"type": "json_schema", "schema": schema}},
    )
    jsonschema.validate(json.loads(generate(engine, shaped)), schema)


def test_a_schema_the_grammar_cannot_express_is_refused(make_engine: EngineFactory) -> None:
    engine = make_engine()
    request = greedy(PROMPT, 4, response_format={"type": "json_schema", "schema": {"$ref": 5}})
    with pytest.raises(InvalidInput) as caught:
        engine.submit(request)
    assert caught.value.code == "invalid_parameter"


def test_unloading_ends_open_generations(make_engine: EngineFactory) -> None:
    engine = make_engine()

    async def run() -> str:
        generation = engine.submit(greedy(PROMPT, 400))
        async for _ in generation:
            break
        await asyncio.to_thread(engine.unload)
        try:
            async for _ in generation:
                pass
        except Exception as exc:
            return getattr(exc, "code", "")
        return "no error"

    assert asyncio.run(run()) == "model_unloading"
    with pytest.raises(Unavailable) as caught:  # its vocabulary is freed with the model
        engine.encode(greedy(PROMPT))
    assert caught.value.code == "model_unloading"


def test_a_generation_without_a_bound_stops_at_the_contexts_end(make_engine: EngineFactory) -> None:
    engine = make_engine()
    engine.config = replace(engine.config, context_length=24)
    engine.scheduler.context_length = 24
    prompt_tokens = len(engine.encode(greedy(PROMPT)))
    request = GenerationRequest(
        prompt=PROMPT,
        max_tokens=24,  # the context: the read step's bound
        parameters={"temperature": 0, "logit_bias": {str(t): -100 for t in ends(engine)}},
        to_context_end=True,
    )

    async def run() -> tuple[int, str | None]:
        chunks = [c async for c in engine.submit(request)]
        return sum(c.tokens for c in chunks), chunks[-1].finish_reason

    assert asyncio.run(run()) == (24 - prompt_tokens, "length")

    # Without the flag the same bound does not fit beside the prompt.
    async def bounded() -> None:
        engine.submit(replace(request, to_context_end=False))

    with pytest.raises(InvalidInput) as caught:
        asyncio.run(bounded())
    assert caught.value.code == "context_length_exceeded"


def ends(engine: BatchingEngine) -> list[int]:
    kernels: Any = engine.kernels
    return [t for t in range(kernels.vocab.n_vocab) if kernels.is_end(t)]
