"""/v1/completions with the official SDK: a prompt or several (each its own call, its
choices numbered prompt by prompt), OpenAI's default of 16 tokens, streaming with
usage, and logprobs in the completions shape."""

from __future__ import annotations

import asyncio

from tests.api_openai.conftest import World


def test_a_prompt_is_completed_with_usage(world: World) -> None:
    answer = world.client().completions.create(model="acme/writer", prompt="say it back")
    assert answer.object == "text_completion" and answer.id.startswith("cmpl-")
    [choice] = answer.choices
    assert (choice.index, choice.text, choice.finish_reason) == (0, "say it back", "stop")
    assert answer.usage is not None
    assert (answer.usage.prompt_tokens, answer.usage.completion_tokens) == (3, 3)
    assert world.engine.records[-1].request.messages is None


def test_without_max_tokens_a_completion_stops_at_openais_default_of_16(world: World) -> None:
    answer = world.client().completions.create(model="acme/counter", prompt="count")
    assert answer.choices[0].text == " ".join(str(i) for i in range(1, 17))
    assert answer.choices[0].finish_reason == "length"
    assert answer.usage is not None and answer.usage.completion_tokens == 16


def test_several_prompts_are_choices_in_prompt_order(world: World) -> None:
    answer = world.client().completions.create(
        model="acme/writer", prompt=["a b", "c d e"], n=2, max_tokens=8
    )
    texts = [(c.index, c.text) for c in answer.choices]
    assert texts == [(0, "a b"), (1, "b a"), (2, "c d e"), (3, "d e c")]
    assert answer.usage is not None
    assert (answer.usage.prompt_tokens, answer.usage.completion_tokens) == (5, 10)
    assert len(world.engine.records) == 2  # one call per prompt


def test_a_streamed_completion_with_usage(world: World) -> None:
    stream = world.client().completions.create(
        model="acme/writer",
        prompt="one two three",
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    *texts, last = chunks
    assert "".join(c.choices[0].text for c in texts) == "one two three"
    assert texts[-1].choices[0].finish_reason == "stop"
    assert last.choices == [] and last.usage is not None
    assert last.usage.total_tokens == 6


def test_logprobs_in_the_completions_shape(world: World) -> None:
    answer = world.client().completions.create(model="acme/writer", prompt="x y", logprobs=0)
    logprobs = answer.choices[0].logprobs
    assert logprobs is not None
    assert logprobs.tokens == ["x", " y"] and logprobs.token_logprobs == [-0.5, -0.5]
    assert logprobs.text_offset == [0, 1]


def test_the_async_client_streams_completions(world: World) -> None:
    async def run() -> str:
        async with world.async_client() as client:
            stream = await client.completions.create(
                model="acme/counter", prompt="go", max_tokens=4, stream=True
            )
            return "".join([c.choices[0].text async for c in stream if c.choices])

    assert asyncio.run(run()) == "1 2 3 4"
