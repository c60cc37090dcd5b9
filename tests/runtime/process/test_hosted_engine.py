"""Generative versions in model hosts: the engine (llama.cpp on SmolLM2's GGUF) runs in
a sandboxed process of its own, holding nothing of the server's, and answers as the
engine in the server does; refusals, cancels and crashes cross the socket."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from modelport.digests import sha256_digest
from modelport.errors import InvalidInput, Unavailable
from modelport.manifest import Manifest, parse_manifest
from modelport.runtime.engines import GenerativeHost
from modelport.runtime.formats.transformers.generative import TransformersGenerativeFormat
from modelport.runtime.generative.metrics import GenerationMetrics
from modelport.runtime.process.hosted_engine import CRASHED, HostedEngine
from modelport.runtime.process.hosted_format import HostedGenerativeFormat
from modelport.runtime.process.launching import SandboxLauncher
from modelport.runtime.types import GenerationRequest, VersionKey
from modelport.sandbox import Sandbox, SandboxMode, isolation_available
from tests.conftest import skip_or_fail
from tests.runtime.generative.helpers import wait_until

pytest.importorskip("llama_cpp")
pytest.importorskip("transformers")
from tests.runtime.formats.transformers.packages import smollm2_gguf

pytestmark = pytest.mark.slow  # model hosts are processes

OPTIONS = {"kv_cache_bytes": 32 << 20, "max_running": 4, "threads": 1}
ENTRY = "modelport.runtime.formats.transformers.generative:TransformersGenerativeFormat"
SECRET = "mp_admin_do-not-leak-0123456789"
PROMPT = "The capital of France is"


def greedy(prompt: str, max_tokens: int) -> GenerationRequest:
    return GenerationRequest(prompt=prompt, max_tokens=max_tokens, parameters={"temperature": 0})


@pytest.fixture(scope="module")
def gguf() -> Path:
    return smollm2_gguf().resolve()


@pytest.fixture(scope="module")
def manifest(gguf: Path) -> Manifest:
    entry = {
        "path": gguf.name,
        "digest": sha256_digest(gguf.read_bytes()),
        "size": gguf.stat().st_size,
    }
    return parse_manifest(
        {
            "format": "transformers",
            "files": [entry],
            "inputs": [{"name": "messages", "datatype": "BYTES", "shape": [1]}],
            "outputs": [{"name": "tokens", "datatype": "INT64", "shape": [-1]}],
            "license": "Apache-2.0",
            "runtime": {"task": "chat", "context_length": 2048},
        }
    )


@pytest.fixture(scope="module")
def hosted() -> HostedGenerativeFormat:
    if not isolation_available():
        skip_or_fail("bubblewrap cannot make namespaces here")
    launcher = SandboxLauncher(Sandbox(SandboxMode.BUBBLEWRAP))
    inner = TransformersGenerativeFormat(**OPTIONS)  # type: ignore[arg-type]
    return HostedGenerativeFormat(
        inner,
        entry=ENTRY,
        options=OPTIONS,
        launcher=launcher,
        start_timeout=120,
        metrics=GenerationMetrics(),
    )


@pytest.fixture
def engine(
    hosted: HostedGenerativeFormat, gguf: Path, manifest: Manifest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[HostedEngine]:
    monkeypatch.setenv("MODELPORT_ADMIN_KEY", SECRET)  # what the host must not see
    loaded = hosted.load({gguf.name: gguf}, manifest, name="acme/smol:1")
    assert isinstance(loaded, HostedEngine)
    yield loaded
    loaded.unload()


def generate(engine: HostedEngine, request: GenerationRequest) -> str:
    async def run() -> str:
        return "".join([c.text async for c in engine.submit(request)])

    return asyncio.run(run())


def host_processes(engine: HostedEngine) -> list[psutil.Process]:
    pid = engine.worker.pid
    assert pid is not None
    top = psutil.Process(pid)
    return [top, *top.children(recursive=True)]


def test_the_host_answers_as_the_engine_in_the_server_and_holds_no_secret(
    engine: HostedEngine, gguf: Path, manifest: Manifest
) -> None:
    assert engine.kind == "llama.cpp" and engine.worker.isolation == "bubblewrap"
    inside = TransformersGenerativeFormat(**OPTIONS).load(  # type: ignore[arg-type]
        {gguf.name: gguf}, manifest, name="acme/smol:1"
    )
    try:
        assert generate(engine, greedy(PROMPT, 16)) == generate(inside, greedy(PROMPT, 16))  # type: ignore[arg-type]
    finally:
        inside.unload()
    for process in host_processes(engine):
        environment = Path(f"/proc/{process.pid}/environ").read_bytes()
        assert SECRET.encode() not in environment
        assert b"MODELPORT_" not in environment


def test_refusals_cancels_and_metrics_cross_the_host(engine: HostedEngine) -> None:
    async def refused() -> str:
        generation = engine.submit(greedy(PROMPT, 1 << 19))
        try:
            await generation.accepted()
        except InvalidInput as exc:
            return str(exc.code)
        return "accepted"

    assert asyncio.run(refused()) == "context_length_exceeded"

    async def cancelled() -> None:
        generation = engine.submit(greedy(PROMPT, 400))
        async for _ in generation:
            break
        generation.cancel()

    asyncio.run(cancelled())
    assert generate(engine, greedy("Once upon a time", 4))  # the host goes on serving
    holder = engine.metrics
    assert holder is not None

    def queried() -> float:
        return float(holder.prefix_queried_tokens._value.get())

    wait_until(lambda: queried() > 0)  # the host's stats reached this process
    assert holder.generated_tokens._value.get() >= 4


def test_a_killed_host_fails_its_generations_and_the_version_loads_again(
    hosted: HostedGenerativeFormat, gguf: Path, manifest: Manifest
) -> None:
    class Files:
        def materialize(self, *_: object) -> object:
            return type("Materialized", (), {"files": {gguf.name: gguf}})()

    host = GenerativeHost(cache=Files(), formats={"transformers": hosted})  # type: ignore[arg-type]
    key = VersionKey("acme/smol", "1", "sha256:" + "0" * 64)

    async def run() -> str:
        engine = await host.ensure_loaded(key, manifest, source=None)  # type: ignore[arg-type]
        assert isinstance(engine, HostedEngine)
        generation = engine.submit(greedy(PROMPT, 400))
        try:
            async for _ in generation:
                os.killpg(engine.worker.pid or 0, signal.SIGKILL)
        except Unavailable as exc:
            code = str(exc.code)
        else:
            code = "ended"
        await asyncio.to_thread(wait_until, lambda: engine.dead is not None)
        assert host.engine(key) is None  # forgotten: the next call loads it again
        again = await host.ensure_loaded(key, manifest, source=None)  # type: ignore[arg-type]
        assert again is not engine
        text = "".join([c.text async for c in again.submit(greedy(PROMPT, 4))])
        assert text
        return code

    try:
        assert asyncio.run(run()) == CRASHED
    finally:
        host.close()


def test_a_chunks_compute_is_checked_like_the_rest_of_it() -> None:
    from modelport.errors import Unavailable
    from modelport.runtime.process.hosted_engine import chunk_of

    base = {"op": "chunk", "text": "hi", "tokens": 1, "finish": None, "choice": 0}
    assert chunk_of({**base, "compute": 0.25}).compute_seconds == 0.25
    assert chunk_of(base).compute_seconds == 0.0  # a worker that reports none
    for bad in (-1.0, float("nan"), float("inf"), "1", True, None):
        with pytest.raises(Unavailable):
            chunk_of({**base, "compute": bad})
