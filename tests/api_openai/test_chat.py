"""/v1/chat/completions with the official SDK, sync and async, whole and streamed:
the text the engine produced, ``usage`` on every answer, finish reasons, choices
(``n``), stop sequences, logprobs, and the sampling parameters reaching the engine."""

from __future__ import annotations

import asyncio

import pytest

from tests.api_openai.conftest import World

HELLO = [{"role": "user", "content": "hello there friend"}]


def test_a_chat_answers_with_the_engines_text_and_its_usage(world: World) -> None:
    answer = world.client().chat.completions.create(model="acme/writer", messages=HELLO)
    assert answer.object == "chat.completion"
    assert answer.id.startswith("chatcmpl-") and answer.model == "acme/writer"
    [choice] = answer.choices
    assert choice.index == 0 and choice.message.role == "assistant"
    assert choice.message.content == "hello there friend"
    assert choice.finish_reason == "stop"
    assert answer.usage is not None
    assert (answer.usage.prompt_tokens, answer.usage.completion_tokens) == (3, 3)
    assert answer.usage.total_tokens == 6
    [record] = world.engine.records
    assert [m.content for m in record.request.messages or ()] == ["hello there friend"]


def test_max_tokens_cuts_the_answer_with_finish_reason_length(world: World) -> None:
    client = world.client()
    for limit in ("max_tokens", "max_completion_tokens"):
        answer = client.chat.completions.create(
            model="acme/writer",
            messages=[{"role": "user", "content": "one two three four"}],
            **{limit: 2},  # type: ignore[arg-type]
        )
        assert answer.choices[0].message.content == "one two"
        assert answer.choices[0].finish_reason == "length"
        assert answer.usage is not None and answer.usage.completion_tokens == 2
    assert [r.request.max_tokens for r in world.engine.records] == [2, 2]


def test_n_choices_each_with_its_text_and_usage_for_all(world: World) -> None:
    answer = world.client().chat.completions.create(
        model="acme/writer", messages=[{"role": "user", "content": "a b c"}], n=2
    )
    texts = {c.index: c.message.content for c in answer.choices}
    assert texts == {0: "a b c", 1: "b c a"}
    assert {c.finish_reason for c in answer.choices} == {"stop"}
    assert answer.usage is not None and answer.usage.completion_tokens == 6


def test_stop_reaches_the_engine_and_ends_the_choice(world: World) -> None:
    client = world.client()
    answer = client.chat.completions.create(
        model="acme/writer", messages=[{"role": "user", "content": "a b STOP c"}], stop="STOP"
    )
    assert answer.choices[0].message.content == "a b"
    assert answer.choices[0].finish_reason == "stop"
    listed = client.chat.completions.create(
        model="acme/writer",
        messages=[{"role": "user", "content": "a b c d"}],
        stop=["x", "c"],
    )
    assert listed.choices[0].message.content == "a b"
    assert world.engine.records[-1].request.parameters["stop"] == ["x", "c"]


def test_sampling_parameters_reach_the_engine(world: World) -> None:
    world.client().chat.completions.create(
        model="acme/writer",
        messages=[
            {"role": "developer", "content": "be brief"},
            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        ],
        temperature=0.5,
        top_p=0.9,
        seed=7,
        user="someone",
        extra_body={"top_k": 40, "an_unknown_field": 1},
    )
    request = world.engine.records[-1].request
    assert request.parameters == {"temperature": 0.5, "top_p": 0.9, "top_k": 40, "seed": 7}
    assert [(m.role, m.content) for m in request.messages or ()] == [
        ("system", "be brief"),
        ("user", "hi"),
    ]


def test_logprobs_of_each_token(world: World) -> None:
    answer = world.client().chat.completions.create(
        model="acme/writer", messages=[{"role": "user", "content": "x y"}], logprobs=True
    )
    logprobs = answer.choices[0].logprobs
    assert logprobs is not None and logprobs.content is not None
    assert [(t.token, t.logprob) for t in logprobs.content] == [("x", -0.5), (" y", -0.5)]
    plain = world.client().chat.completions.create(model="acme/writer", messages=HELLO)
    assert plain.choices[0].logprobs is None


def test_a_streamed_chat_sends_the_role_first_then_text_finish_and_usage(world: World) -> None:
    stream = world.client().chat.completions.create(
        model="acme/writer",
        messages=[{"role": "user", "content": "one two three"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert {c.object for c in chunks} == {"chat.completion.chunk"}
    assert len({c.id for c in chunks}) == 1
    first, *middle, last = chunks
    assert first.choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in middle) == "one two three"
    assert middle[-1].choices[0].finish_reason == "stop"
    assert all(c.usage is None for c in [first, *middle])
    assert last.choices == [] and last.usage is not None
    assert (last.usage.prompt_tokens, last.usage.completion_tokens) == (3, 3)


def test_a_streamed_chat_without_include_usage_sends_no_usage_chunk(world: World) -> None:
    chunks = list(
        world.client().chat.completions.create(
            model="acme/writer", messages=HELLO, stream=True, n=2
        )
    )
    assert all(c.choices for c in chunks)
    by_choice: dict[int, str] = {}
    for chunk in chunks:
        choice = chunk.choices[0]
        by_choice[choice.index] = by_choice.get(choice.index, "") + (choice.delta.content or "")
    assert by_choice == {0: "hello there friend", 1: "there friend hello"}
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices[0].finish_reason]
    assert finishes == ["stop", "stop"]


def test_the_async_client_whole_and_streamed(world: World) -> None:
    async def run() -> tuple[str | None, str]:
        async with world.async_client() as client:
            answer = await client.chat.completions.create(model="acme/writer", messages=HELLO)
            stream = await client.chat.completions.create(
                model="acme/writer", messages=HELLO, stream=True
            )
            streamed = ""
            async for chunk in stream:
                if chunk.choices:
                    streamed += chunk.choices[0].delta.content or ""
            return answer.choices[0].message.content, streamed

    whole, streamed = asyncio.run(run())
    assert whole == streamed == "hello there friend"


@pytest.mark.parametrize("stream", [False, True])
def test_a_completion_model_also_chats_through_its_engine(world: World, stream: bool) -> None:
    """acme/counter counts: its answer is the engine's, whatever the surface."""
    client = world.client()
    if stream:
        text = "".join(
            c.choices[0].delta.content or ""
            for c in client.chat.completions.create(
                model="acme/counter", messages=HELLO, max_tokens=3, stream=True
            )
            if c.choices
        )
    else:
        answer = client.chat.completions.create(model="acme/counter", messages=HELLO, max_tokens=3)
        text = answer.choices[0].message.content or ""
    assert text == "1 2 3"
