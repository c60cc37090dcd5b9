"""``RemoteOpenAIBackend.stream`` against a real local server streaming server-sent
events as vLLM does: chunks in order, the usage reported at the end riding on the last
chunk, refusals before the first chunk mapped as the non-streamed path maps them, a
connection dropped mid-stream a failure after chunks went out, the call id passed on,
and a consumer that leaves hangs up on the server."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from contextlib import aclosing
from typing import Any

import pytest

from modelport.errors import InvalidInput, ModelportError, Overloaded, Unavailable
from modelport.runtime.types import ChatMessage
from modelport.serving.backends.remote_openai import RemoteOpenAIBackend
from modelport.serving.types import StreamChunk, StreamRequest, VersionRef
from tests.serving.backend_support import version_ref
from tests.serving.sse_server import MODEL, SseServer

PROMPT = "the quick brown fox jumps"


@pytest.fixture
def server() -> Iterator[SseServer]:
    server = SseServer().start()
    yield server
    server.stop()


def llm(task: str = "chat") -> VersionRef:
    return version_ref(
        "acme/llm",
        fmt="gguf",
        inputs=[{"name": "prompt", "datatype": "BYTES", "shape": [1]}],
        outputs=[{"name": "text", "datatype": "BYTES", "shape": [1]}],
        runtime={"protocol": "openai", "task": task},
    )


def backend(url: str) -> RemoteOpenAIBackend:
    return RemoteOpenAIBackend("oa-1", url, formats=frozenset({"gguf"}), models={"acme/llm": MODEL})


def request(task: str = "chat", **fields: Any) -> StreamRequest:
    fields.setdefault("prompt", PROMPT)
    fields.setdefault("max_tokens", 16)
    return StreamRequest(
        version=llm(task), deadline=time.monotonic() + 10, task=task, call_id="call-7", **fields
    )


def collect(url: str, req: StreamRequest) -> list[StreamChunk]:
    async def scenario() -> list[StreamChunk]:
        target = backend(url)
        try:
            async with aclosing(target.stream(req)) as chunks:
                return [chunk async for chunk in chunks]
        finally:
            await target.close()

    return asyncio.run(scenario())


def refusal(url: str, req: StreamRequest) -> ModelportError:
    with pytest.raises(ModelportError) as caught:
        collect(url, req)
    return caught.value


def test_a_chat_streams_in_order_with_the_usage_on_its_last_chunk(server: SseServer) -> None:
    chunks = collect(server.url, request())
    assert "".join(c.text for c in chunks) == PROMPT
    assert [c.index for c in chunks] == list(range(len(chunks)))
    assert chunks[0].text == "" and chunks[0].output_tokens == 0  # the role event
    assert [c.finish_reason for c in chunks[:-1]] == [None] * (len(chunks) - 1)
    last = chunks[-1]
    assert (last.finish_reason, last.input_tokens) == ("stop", 5)
    assert sum(c.output_tokens for c in chunks) == 5
    assert {c.backend for c in chunks} == {"oa-1"}
    body = server.calls[0]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["messages"] == [{"role": "user", "content": PROMPT}]
    assert (body["model"], body["max_tokens"], body["n"]) == (MODEL, 16, 1)
    assert server.call_ids == ["call-7"]


def test_a_chat_sends_its_messages_and_a_completion_its_prompt(server: SseServer) -> None:
    chat = (ChatMessage("system", "be brief"), ChatMessage("user", "one two"))
    chunks = collect(server.url, request(messages=chat, max_tokens=1))
    assert server.calls[0]["messages"][0] == {"role": "system", "content": "be brief"}
    assert "".join(c.text for c in chunks) == "one"
    assert chunks[-1].finish_reason == "length"

    chunks = collect(server.url, request("completions", parameters={"temperature": 0.5}))
    body = server.calls[1]
    assert body["prompt"] == PROMPT and body["temperature"] == 0.5 and "messages" not in body
    assert "".join(c.text for c in chunks) == PROMPT
    assert chunks[0].text == "the"  # no role event for a completion


def test_without_usage_each_event_counts_one_token_and_no_input(server: SseServer) -> None:
    server.report_usage = False
    chunks = collect(server.url, request())
    assert sum(c.output_tokens for c in chunks) == 5
    assert sum(c.input_tokens for c in chunks) == 0
    assert chunks[-1].finish_reason == "stop"


@pytest.mark.parametrize(
    ("status", "kind", "code"),
    [
        (400, InvalidInput, "invalid_request"),
        (429, Overloaded, "backend_overloaded"),
        (500, Unavailable, "backend_unavailable"),
        (401, Unavailable, "backend_unauthorized"),
    ],
)
def test_refusals_before_the_first_chunk_map_as_for_infer(
    server: SseServer, status: int, kind: type[ModelportError], code: str
) -> None:
    server.status = status
    refused = refusal(server.url, request())
    assert type(refused) is kind and refused.code == code


def test_a_model_the_server_lacks_is_about_that_version_only(server: SseServer) -> None:
    target = RemoteOpenAIBackend("oa-1", server.url, formats=frozenset({"gguf"}))

    async def scenario() -> None:
        async with aclosing(target.stream(request())) as chunks:
            await anext(chunks)

    with pytest.raises(Unavailable) as caught:
        asyncio.run(scenario())
    assert caught.value.code == "backend_model_not_found"
    assert caught.value.extra["scope"] == "version"


def test_an_unreachable_server_and_a_task_it_cannot_stream(server: SseServer) -> None:
    from tests.conftest import free_port

    refused = refusal(f"http://127.0.0.1:{free_port()}", request())
    assert isinstance(refused, Unavailable) and refused.code == "backend_unreachable"
    refused = refusal(server.url, request("embeddings"))
    assert refused.code == "streaming_unsupported" and refused.extra["scope"] == "version"
    assert server.calls == []


def test_a_connection_dropped_mid_stream_fails_after_chunks_went_out(server: SseServer) -> None:
    server.break_after = 2
    received: list[StreamChunk] = []

    async def scenario() -> None:
        target = backend(server.url)
        try:
            async with aclosing(target.stream(request())) as chunks:
                async for chunk in chunks:
                    received.append(chunk)
        finally:
            await target.close()

    with pytest.raises(Unavailable) as caught:
        asyncio.run(scenario())
    assert caught.value.code == "backend_unreachable"
    assert "".join(c.text for c in received) == "the quick"
    assert all(c.finish_reason is None for c in received)


def test_a_consumer_that_leaves_hangs_up_on_the_server(server: SseServer) -> None:
    server.delay = 0.05

    async def scenario() -> None:
        target = backend(server.url)
        try:
            async with aclosing(target.stream(request(prompt="a " * 200, max_tokens=200))) as c:
                async for chunk in c:
                    if chunk.text.strip() == "a" and chunk.index >= 3:
                        break
        finally:
            await target.close()

    asyncio.run(scenario())
    deadline = time.monotonic() + 30
    while server.closed_early == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.closed_early == 1
    assert server.sent < 200
