"""``Backend.stream``: the local backend streams from a generative engine (in order,
cancelled when its consumer leaves or the deadline passes); a tensor model, the
remote V2 backend and an OpenAI-compatible one asked for a task it cannot stream
refuse with ``streaming_unsupported``."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from contextlib import aclosing
from pathlib import Path

import pytest

from modelport.errors import DeadlineExceeded, Unavailable, Unprocessable
from modelport.manifest import Manifest, manifest_digest
from modelport.runtime.cache import ModelCache
from modelport.runtime.engines import GenerativeHost
from modelport.runtime.formats.registry import FormatRegistry
from modelport.runtime.host import MemoryBudget, ModelHost
from modelport.serving.backends.base import STREAMING_UNSUPPORTED, Backend
from modelport.serving.backends.fake import FakeBackend
from modelport.serving.backends.local import LocalBackend
from modelport.serving.backends.remote_openai import RemoteOpenAIBackend
from modelport.serving.backends.remote_v2 import RemoteV2Backend
from modelport.serving.types import StreamChunk, StreamRequest, VersionRef
from modelport.testing.toy_engine import TOY_FORMAT, ToyEngine, ToyGenerativeFormat
from tests.runtime.conftest import DictBlobSource, add_one_manifest

Parts = tuple[LocalBackend, ToyEngine, VersionRef]


@pytest.fixture
def parts(tmp_path: Path) -> Iterator[Parts]:
    source = DictBlobSource()
    cache = ModelCache(tmp_path / "cache")
    host = ModelHost(cache=cache, formats=FormatRegistry(), budget=MemoryBudget(host_bytes=None))
    engine = ToyEngine()
    engines = GenerativeHost(cache=cache, formats={TOY_FORMAT: ToyGenerativeFormat(engine)})
    data = b"toy weights"
    manifest = Manifest.model_validate(
        {
            "format": TOY_FORMAT,
            "files": [{"path": "w.bin", "digest": source.add(data), "size": len(data)}],
            "inputs": [{"name": "prompt", "datatype": "BYTES", "shape": [1]}],
            "outputs": [{"name": "text", "datatype": "BYTES", "shape": [1]}],
            "license": "MIT",
        }
    )
    version = VersionRef("acme/writer", "1", manifest_digest(manifest), manifest)
    yield LocalBackend(host, source, engines=engines), engine, version
    engines.close()
    host.close()


def request(
    version: VersionRef, prompt: str = "a b c", max_tokens: int = 8, timeout: float = 5.0
) -> StreamRequest:
    return StreamRequest(
        version=version,
        prompt=prompt,
        max_tokens=max_tokens,
        deadline=time.monotonic() + timeout,
        request_id="r1",
    )


async def collect(backend: Backend, req: StreamRequest) -> list[StreamChunk]:
    async with aclosing(backend.stream(req)) as chunks:  # type: ignore[type-var]  # an async generator
        return [chunk async for chunk in chunks]


def test_the_local_backend_streams_the_engines_chunks_in_order(parts: Parts) -> None:
    backend, engine, version = parts
    assert TOY_FORMAT in backend.capabilities().formats
    chunks = asyncio.run(collect(backend, request(version)))
    assert [(c.index, c.text, c.output_tokens, c.input_tokens) for c in chunks] == [
        (0, "", 0, 3),  # accepted: the prompt's tokens, before any output
        (1, "a", 1, 0),
        (2, " b", 1, 0),
        (3, " c", 1, 0),
    ]
    assert chunks[-1].finish_reason == "stop" and {c.backend for c in chunks} == {"local"}
    assert engine.cancelled == []


def test_max_tokens_stops_the_engine_with_length(parts: Parts) -> None:
    backend, engine, version = parts
    engine.mode = "count"
    chunks = asyncio.run(collect(backend, request(version, max_tokens=3)))
    assert [c.text for c in chunks[1:]] == ["1", " 2", " 3"]
    assert chunks[-1].finish_reason == "length"


def test_a_consumer_that_stops_cancels_the_generation(parts: Parts) -> None:
    backend, engine, version = parts
    engine.mode, engine.delay = "count", 0.01

    async def scenario() -> None:
        async with aclosing(backend.stream(request(version, max_tokens=1000))) as chunks:  # type: ignore[type-var]
            async for chunk in chunks:
                if chunk.index == 2:
                    break

    asyncio.run(scenario())
    assert engine.cancelled == ["r1"]
    assert engine.records[0].produced == 2


def test_the_deadline_cuts_the_generation(parts: Parts) -> None:
    backend, engine, version = parts
    engine.mode, engine.delay = "count", 0.05
    with pytest.raises(DeadlineExceeded):
        asyncio.run(collect(backend, request(version, max_tokens=1000, timeout=0.3)))
    assert engine.cancelled == ["r1"]
    assert engine.records[0].produced < 10


def test_concurrent_first_streams_load_the_engine_once(parts: Parts) -> None:
    backend, _, version = parts
    assert backend.engines is not None
    plugin = backend.engines.formats[TOY_FORMAT]
    assert isinstance(plugin, ToyGenerativeFormat)

    async def scenario() -> list[list[StreamChunk]]:
        return await asyncio.gather(*(collect(backend, request(version)) for _ in range(5)))

    assert all(len(chunks) == 4 for chunks in asyncio.run(scenario()))
    assert plugin.loads == 1


def test_a_version_not_loaded_is_refused_for_that_version_only(parts: Parts) -> None:
    backend, engine, version = parts
    backend.load_on_demand = False
    with pytest.raises(Unavailable) as caught:
        asyncio.run(collect(backend, request(version)))
    assert (caught.value.code, caught.value.extra["scope"]) == ("model_not_loaded", "version")
    assert engine.records == []


def test_a_tensor_model_cannot_stream(parts: Parts) -> None:
    backend, _, _ = parts
    manifest, digest = add_one_manifest(DictBlobSource())
    version = VersionRef("acme/adder", "1", digest, manifest)
    with pytest.raises(Unprocessable) as caught:
        asyncio.run(collect(backend, request(version)))
    assert caught.value.code == STREAMING_UNSUPPORTED


@pytest.mark.parametrize(
    "backend",
    [
        RemoteV2Backend("v2", "http://127.0.0.1:9"),
        # A version whose task it cannot stream (the OpenAI one streams chat and
        # completions: test_remote_openai_stream.py).
        RemoteOpenAIBackend("oa", "http://127.0.0.1:9", formats=frozenset({"gguf"})),
        FakeBackend("fake"),
    ],
    ids=["remote_v2", "remote_openai", "fake"],
)
def test_backends_that_cannot_stream_say_so(backend: Backend, parts: Parts) -> None:
    _, _, version = parts
    with pytest.raises(Unavailable) as caught:
        asyncio.run(collect(backend, request(version)))
    assert caught.value.code == STREAMING_UNSUPPORTED
    assert caught.value.extra["scope"] == "version"  # another backend may stream it
