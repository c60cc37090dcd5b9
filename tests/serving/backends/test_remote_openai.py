"""The OpenAI-compatible backend against a small OpenAI-style server: texts in and out as
BYTES tensors, embeddings as FP32, errors mapped, and capability filtering by task and
context length."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine
from typing import Any, TypeVar

import numpy as np
import pytest

from modelport.errors import InvalidInput, Overloaded, Unavailable
from modelport.serving.backends.remote_openai import RemoteOpenAIBackend
from modelport.serving.dispatch import Dispatcher
from modelport.serving.health import HealthBoard
from modelport.serving.types import BackendRequest, Health, VersionRef
from tests.conftest import free_port
from tests.serving.backend_support import version_ref
from tests.serving.backends.conftest import OpenAIServer

T = TypeVar("T")
TEXT_IN = [{"name": "prompt", "datatype": "BYTES", "shape": [-1]}]
PROMPTS = np.array([b"hello world", b"modelport"], dtype=object)


def llm_version(task: str, model: str = "acme/llm") -> VersionRef:
    outputs = (
        [{"name": "embedding", "datatype": "FP32", "shape": [-1, 3]}]
        if task == "embeddings"
        else [{"name": "text", "datatype": "BYTES", "shape": [-1]}]
    )
    return version_ref(
        model,
        fmt="gguf",
        inputs=TEXT_IN,
        outputs=outputs,
        runtime={"protocol": "openai", "task": task},
    )


def backend(server: OpenAIServer, **options: Any) -> RemoteOpenAIBackend:
    options.setdefault("formats", frozenset({"gguf"}))
    options.setdefault("models", {"acme/llm": "tiny-llm"})
    return RemoteOpenAIBackend("llm-1", server.url, **options)


def request(version: VersionRef, prompts: np.ndarray = PROMPTS, **extra: Any) -> BackendRequest:
    return BackendRequest(
        version=version, inputs={"prompt": prompts}, deadline=time.monotonic() + 10, **extra
    )


def run(target: RemoteOpenAIBackend, body: Coroutine[Any, Any, T]) -> T:
    async def scenario() -> T:
        try:
            return await body
        finally:
            await target.close()

    return asyncio.run(scenario())


def test_completions_one_text_per_row(openai_server: OpenAIServer) -> None:
    target = backend(openai_server)
    version = llm_version("completions")
    response = run(target, target.infer(request(version, parameters={"max_tokens": 5})))
    assert response.outputs["text"].tolist() == [b"dlrow", b"tropl"]
    assert response.batch_size == 2
    path, body = openai_server.calls[-1]
    assert path == "/v1/completions"
    assert body["model"] == "tiny-llm"
    assert body["prompt"] == ["hello world", "modelport"]
    assert body["max_tokens"] == 5


def test_chat_one_call_per_row(openai_server: OpenAIServer) -> None:
    target = backend(openai_server)
    response = run(target, target.infer(request(llm_version("chat"))))
    assert response.outputs["text"].tolist() == [b"dlrow olleh", b"tropledom"]
    assert [path for path, _ in openai_server.calls] == ["/v1/chat/completions"] * 2


def test_embeddings_are_fp32_rows(openai_server: OpenAIServer) -> None:
    target = backend(openai_server)
    response = run(target, target.infer(request(llm_version("embeddings"))))
    embedding = response.outputs["embedding"]
    assert embedding.dtype == np.float32
    np.testing.assert_array_equal(embedding, [[11, 3, 1], [9, 3, 0]])


def test_health(openai_server: OpenAIServer) -> None:
    target = backend(openai_server)
    assert run(target, target.health()) is Health.HEALTHY
    dead = RemoteOpenAIBackend("dead", f"http://127.0.0.1:{free_port()}", formats=frozenset())
    assert run(dead, dead.health()) is Health.UNHEALTHY


@pytest.mark.parametrize(
    ("status", "error", "code"),
    [
        (400, InvalidInput, "invalid_request"),
        (401, Unavailable, "backend_unauthorized"),
        (429, Overloaded, "backend_overloaded"),
        (500, Unavailable, "backend_unavailable"),
    ],
)
def test_errors_are_mapped(
    openai_server: OpenAIServer, status: int, error: type[Exception], code: str
) -> None:
    openai_server.status = status
    target = backend(openai_server)
    with pytest.raises(error) as caught:
        run(target, target.infer(request(llm_version("completions"))))
    assert caught.value.code == code  # type: ignore[attr-defined]


def test_an_unknown_remote_model_is_version_scoped(openai_server: OpenAIServer) -> None:
    target = backend(openai_server, models={})
    with pytest.raises(Unavailable) as caught:
        run(target, target.infer(request(llm_version("completions"))))
    assert caught.value.code == "backend_model_not_found"
    assert "not found" in caught.value.message
    assert caught.value.extra["scope"] == "version"


def test_dispatch_sends_each_task_only_where_it_is_served_and_fits(
    openai_server: OpenAIServer,
) -> None:
    embedder = RemoteOpenAIBackend(
        "embedder",
        openai_server.url,
        formats=frozenset({"gguf"}),
        tasks=frozenset({"embeddings"}),
        models={"acme/llm": "tiny-llm"},
    )
    small = backend(openai_server, tasks=frozenset({"chat"}), context_length=16)
    big = RemoteOpenAIBackend(
        "big",
        openai_server.url,
        formats=frozenset({"gguf"}),
        tasks=frozenset({"chat", "completions"}),
        context_length=4096,
        models={"acme/llm": "tiny-llm"},
    )
    dispatcher = Dispatcher(HealthBoard())
    long_prompt = np.array([b"a" * 200], dtype=object)  # about 50 tokens

    async def scenario() -> list[str | None]:
        try:
            chat_short = await dispatcher.dispatch(
                request(llm_version("chat")), [embedder, small, big]
            )
            chat_long = await dispatcher.dispatch(
                request(llm_version("chat"), long_prompt), [embedder, small, big]
            )
            embed = await dispatcher.dispatch(
                request(llm_version("embeddings")), [small, big, embedder]
            )
            return [p.provenance.backend for p in (chat_short, chat_long, embed)]
        finally:
            for target in (embedder, small, big):
                await target.close()

    assert asyncio.run(scenario()) == ["llm-1", "big", "embedder"]


def test_unknown_tasks_are_refused_at_configuration() -> None:
    with pytest.raises(ValueError, match="unknown tasks"):
        RemoteOpenAIBackend(
            "x", "http://127.0.0.1:1", formats=frozenset(), tasks=frozenset({"tts"})
        )


def test_text_inputs_must_be_bytes(openai_server: OpenAIServer) -> None:
    target = backend(openai_server)
    numbers = np.array([1.0, 2.0], dtype=np.float32)
    with pytest.raises(InvalidInput):
        run(target, target.infer(request(llm_version("completions"), numbers)))
