"""The engine against ``model.generate`` alone: concurrent requests, joining a running
batch, cancel, stops, seeds, choices, logprobs, priority preemption, refusals."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import torch

from modelport.errors import InvalidInput, Overloaded, Unavailable
from modelport.runtime.types import ChatMessage, GenerationRequest, Priority
from tests.runtime.generative.helpers import (
    Collected,
    collect,
    reference,
    sample_value,
    wait_until,
)

PROMPTS = [
    "Hello",
    "The quick brown fox jumps over",
    "Continuous batching decodes every running sequence together, one token per step. A stream",
    "Numbers 0123",
]


def ids_of(tokenizer: Any, prompt: str) -> list[int]:
    return list(tokenizer(prompt)["input_ids"])


def run_one(engine: Any, request: GenerationRequest) -> Collected:
    async def run() -> Collected:
        return await collect(engine.submit(request))

    return asyncio.run(run())


def greedy(prompt: str, max_tokens: int, **parameters: object) -> GenerationRequest:
    return GenerationRequest(
        prompt=prompt, max_tokens=max_tokens, parameters={"temperature": 0, **parameters}
    )


def test_concurrent_requests_each_equal_generate_alone(make_engine, model, tokenizer) -> None:
    engine = make_engine()
    lengths = [5, 23, 40, 11]

    async def run() -> list[Any]:
        gens = [engine.submit(greedy(p, n)) for p, n in zip(PROMPTS, lengths, strict=True)]
        assert [g.input_tokens for g in gens] == [len(ids_of(tokenizer, p)) for p in PROMPTS]
        return await asyncio.gather(*(collect(g) for g in gens))

    results = asyncio.run(run())
    for prompt, n, got in zip(PROMPTS, lengths, results, strict=True):
        want = reference(model, tokenizer, ids_of(tokenizer, prompt), n)
        assert got.text() == want.text
        assert got.tokens() == len(want.ids)
        assert got.finish() == ("stop" if want.ids[-1] == tokenizer.eos_token_id else "length")
        assert all(c.finish_reason is None for c in got.chunks[:-1])
    assert sample_value(engine, "modelport_generation_tokens_total") == sum(
        r.tokens() for r in results
    )


def test_a_request_joins_a_running_batch(make_engine, model, tokenizer) -> None:
    engine = make_engine()

    async def run() -> tuple[Any, Any]:
        first = engine.submit(greedy(PROMPTS[1], 450))
        chunks = aiter(first)
        head = [await anext(chunks)]  # the first sequence is decoding now
        second = await collect(engine.submit(greedy(PROMPTS[2], 12)))
        head.append(await anext(chunks))
        first.cancel()
        return head, second

    head, second = asyncio.run(run())
    # The first was still decoding when the second (prefilled beside it) ended.
    assert head[-1].finish_reason is None
    want = reference(model, tokenizer, ids_of(tokenizer, PROMPTS[2]), 12)
    assert second.text() == want.text
    wait_until(lambda: sample_value(engine, "modelport_generation_running_sequences") == 0)


def test_running_sequences_exceed_one_while_the_first_decodes(make_engine, tokenizer) -> None:
    engine = make_engine()

    async def run() -> float:
        first = engine.submit(greedy(PROMPTS[1], 450))
        chunks = aiter(first)
        await anext(chunks)
        second = aiter(engine.submit(greedy(PROMPTS[0], 400)))
        await anext(second)  # prefilled: the next step decodes both
        await anext(second)
        await anext(second)
        running = sample_value(engine, "modelport_generation_running_sequences")
        first.cancel()
        return running

    assert asyncio.run(run()) == 2


def test_cancel_frees_the_sequence_and_its_kv(make_engine) -> None:
    engine = make_engine(kv_tokens=600)
    capacity = engine.runner.free_slots

    async def run() -> list[Any]:
        generation = engine.submit(greedy(PROMPTS[2], 400))
        got = []
        async for chunk in generation:
            got.append(chunk)
            if len(got) == 3:
                assert sample_value(engine, "modelport_generation_kv_cache_bytes") > 0
                generation.cancel()
        return got

    got = asyncio.run(run())
    assert len(got) == 3  # nothing after the cancel
    wait_until(lambda: sample_value(engine, "modelport_generation_kv_cache_bytes") == 0)
    wait_until(lambda: engine.runner.free_slots == capacity)
    assert sample_value(engine, "modelport_generation_running_sequences") == 0
    # The freed memory admits a request that needs nearly all of it.
    again = run_one(engine, greedy(PROMPTS[0], 500))
    assert again.finish() in ("stop", "length") and again.tokens() >= 1


def test_stop_sequence_cuts_the_text_before_it(make_engine, model, tokenizer) -> None:
    engine = make_engine()
    want = reference(model, tokenizer, ids_of(tokenizer, PROMPTS[1]), 30).text
    stop = want[len(want) // 2 : len(want) // 2 + 3]
    got = run_one(engine, greedy(PROMPTS[1], 30, stop=[stop, "\u2603"]))
    assert got.text() == want[: want.index(stop)]
    assert got.finish() == "stop"
    assert stop not in got.text()


def test_chat_messages_use_the_chat_template(make_engine, model, tokenizer) -> None:
    engine = make_engine()
    messages = (ChatMessage("system", "Be brief."), ChatMessage("user", "Hello world!"))
    request = GenerationRequest(
        prompt="", max_tokens=15, parameters={"temperature": 0}, messages=messages
    )

    async def run() -> tuple[int, Any]:
        generation = engine.submit(request)
        return generation.input_tokens, await collect(generation)

    input_tokens, got = asyncio.run(run())
    ids = tokenizer.apply_chat_template(
        [{"role": m.role, "content": m.content} for m in messages],
        add_generation_prompt=True,
        tokenize=True,
        return_dict=True,
    )["input_ids"]
    assert input_tokens == len(ids)
    assert got.text() == reference(model, tokenizer, list(ids), 15).text


def test_same_seed_same_output_whatever_the_companions(make_engine) -> None:
    engine = make_engine()

    def sampled(seed: int) -> GenerationRequest:
        return GenerationRequest(
            prompt=PROMPTS[1], max_tokens=25, parameters={"temperature": 1.0, "seed": seed}
        )

    async def alone(seed: int) -> str:
        return (await collect(engine.submit(sampled(seed)))).text()

    async def crowded(seed: int) -> str:
        others = [engine.submit(greedy(p, 20)) for p in PROMPTS]
        mine = engine.submit(sampled(seed))
        results = await asyncio.gather(collect(mine), *(collect(g) for g in others))
        return results[0].text()

    first, second = asyncio.run(alone(7)), asyncio.run(crowded(7))
    assert first == second
    assert asyncio.run(alone(8)) != first


def test_n_choices(make_engine, model, tokenizer) -> None:
    engine = make_engine()
    want = reference(model, tokenizer, ids_of(tokenizer, PROMPTS[3]), 10).text
    got = run_one(
        engine,
        GenerationRequest(prompt=PROMPTS[3], max_tokens=10, parameters={"temperature": 0}, n=2),
    )
    assert got.text(0) == got.text(1) == want
    assert got.finish(0) == got.finish(1) == "length"
    sampled = run_one(
        engine,
        GenerationRequest(
            prompt=PROMPTS[3], max_tokens=25, parameters={"temperature": 1.0, "seed": 3}, n=2
        ),
    )
    assert {c.choice for c in sampled.chunks} == {0, 1}
    assert sampled.text(0) != sampled.text(1)


def test_logprobs_are_those_of_the_chosen_tokens(make_engine, model, tokenizer) -> None:
    engine = make_engine()
    want = reference(model, tokenizer, ids_of(tokenizer, PROMPTS[2]), 8)
    got = run_one(engine, greedy(PROMPTS[2], 8, logprobs=True))
    expected = [
        torch.log_softmax(score[0].float(), -1)[token].item()
        for score, token in zip(want.scores, want.ids, strict=True)
    ]
    assert got.logprobs() == pytest.approx(expected, abs=1e-4)
    plain = run_one(engine, greedy(PROMPTS[2], 8))
    assert all(c.logprobs is None for c in plain.chunks)


def test_batch_sequence_preempted_for_interactive_then_completes(
    make_engine, model, tokenizer
) -> None:
    prompt = ids_of(tokenizer, PROMPTS[1])
    # The budget holds the batch sequence alone: the interactive one needs its room.
    engine = make_engine(kv_tokens=len(prompt) + 200)
    batch = GenerationRequest(
        prompt=PROMPTS[1], max_tokens=200, parameters={"temperature": 0}, priority=Priority.BATCH
    )

    async def run() -> tuple[Any, Any, Any]:
        background = engine.submit(batch)
        chunks = aiter(background)
        head = [await anext(chunks)]
        urgent = await collect(engine.submit(greedy(PROMPTS[0], 10)))
        rest = [c async for c in chunks]
        return head + rest, urgent, sample_value(engine, "modelport_generation_preemptions_total")

    chunks, urgent, preemptions = asyncio.run(run())
    assert preemptions == 1
    assert urgent.text() == reference(model, tokenizer, ids_of(tokenizer, PROMPTS[0]), 10).text
    want = reference(model, tokenizer, prompt, 200)
    assert "".join(c.text for c in chunks) == want.text
    assert sum(c.tokens for c in chunks) == len(want.ids)


def test_refusals_at_submit(make_engine) -> None:
    engine = make_engine(kv_tokens=100, context_length=64)

    async def submit(request: GenerationRequest) -> None:
        engine.submit(request)

    with pytest.raises(InvalidInput) as exc:
        asyncio.run(submit(greedy(PROMPTS[0], 80)))
    assert exc.value.code == "context_length_exceeded"
    for parameters, code in (
        ({"temperature": -1}, "invalid_parameter"),
        ({"top_p": 0}, "invalid_parameter"),
        ({"stop": [1]}, "invalid_parameter"),
        ({"seed": "x"}, "invalid_parameter"),
    ):
        with pytest.raises(InvalidInput) as exc:
            asyncio.run(submit(GenerationRequest(prompt="Hi", max_tokens=4, parameters=parameters)))
        assert exc.value.code == code
    with pytest.raises(InvalidInput) as exc:
        asyncio.run(submit(GenerationRequest(prompt="Hi", max_tokens=0)))
    assert exc.value.code == "invalid_parameter"
    assert engine.scheduler.waiting_count == 0 and engine.scheduler.ledger.used_tokens == 0


def test_kv_budget_smaller_than_the_context_refuses_what_never_fits(make_engine) -> None:
    engine = make_engine(kv_tokens=40, context_length=512)

    async def submit() -> None:
        engine.submit(greedy(PROMPTS[0], 60))

    with pytest.raises(InvalidInput) as exc:
        asyncio.run(submit())
    assert exc.value.code == "context_length_exceeded"
    assert engine.runner.free_slots == 40


def test_unload_ends_open_generations(make_engine) -> None:
    engine = make_engine()

    async def run() -> None:
        generation = engine.submit(greedy(PROMPTS[1], 450))
        chunks = aiter(generation)
        await anext(chunks)
        await asyncio.to_thread(engine.unload)
        with pytest.raises(Unavailable) as exc:
            async for _ in chunks:
                pass
        assert exc.value.code == "model_unloading"
        with pytest.raises(Unavailable):
            engine.submit(greedy(PROMPTS[0], 4))

    asyncio.run(run())


def test_requests_beyond_max_running_wait_their_turn(make_engine, model, tokenizer) -> None:
    engine = make_engine(max_running=1)

    async def run() -> list[Any]:
        gens = [engine.submit(greedy(p, 6)) for p in PROMPTS[:3]]
        return await asyncio.gather(*(collect(g) for g in gens))

    for prompt, got in zip(PROMPTS, asyncio.run(run()), strict=False):
        assert got.text() == reference(model, tokenizer, ids_of(tokenizer, prompt), 6).text


def test_queue_full_with_retry_after(make_engine) -> None:
    engine = make_engine(max_waiting=1)

    async def submit() -> None:
        engine.submit(GenerationRequest(prompt="Hi", max_tokens=4, n=2))

    with pytest.raises(Overloaded) as exc:
        asyncio.run(submit())
    assert exc.value.code == "queue_full"
    assert exc.value.extra["retry_after"] > 0
    assert engine.scheduler.waiting_count == 0


def test_each_steps_time_is_shared_over_its_sequences(make_engine) -> None:
    """The compute the chunks report, over every concurrent generation, adds up to the
    time the engine's steps took: each step's time shared by tokens computed."""
    engine = make_engine(max_running=4)

    async def run() -> list[Collected]:
        requests = [greedy("The quick brown fox", 12), greedy("Hello world", 6, n=2)]
        requests.append(greedy("Numbers 0123456789 and punctuation", 9))
        return await asyncio.gather(*(collect(engine.submit(r)) for r in requests))

    generations = asyncio.run(run())
    shares = [c.compute_seconds for g in generations for c in g.chunks]
    assert all(s >= 0 for s in shares) and sum(shares) > 0
    assert sum(shares) == pytest.approx(engine.step_seconds, rel=1e-9)
    # A choice's compute grows with its tokens: each took part in its steps.
    assert all(sum(c.compute_seconds for c in g.choice(0)) > 0 for g in generations)
