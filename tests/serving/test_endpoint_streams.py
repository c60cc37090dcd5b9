"""``InferenceService.stream`` through an endpoint, on SQLite and PostgreSQL: the active
deployment chooses the version (weights, sticky subject); a remote OpenAI-compatible
server (a real local one streaming as vLLM does) and local toy engines serve it;
replicas, breakers and the fallback chain act before the first chunk and never after;
the shadow gets a drained copy, compared and never billed; the canary window, the
prediction log and the ledger record the stream."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from modelport.errors import DeadlineExceeded, ModelportError, Unavailable
from modelport.inference.streaming import CallStream, GenerateRequest
from modelport.inference.types import Caller, EndpointTarget
from modelport.manifest import Manifest
from modelport.metering.balances import BalanceRepository
from modelport.metering.types import (
    BalanceScope,
    FailureRule,
    NewPriceRule,
    Unit,
    UsageEvent,
    UsageStatus,
)
from modelport.observability.prediction_store import PredictionRepository
from modelport.runtime.cache import ModelCache
from modelport.runtime.engines import GenerativeHost
from modelport.runtime.types import Priority
from modelport.serving.backends.local import LocalBackend
from modelport.serving.backends.remote_openai import RemoteOpenAIBackend
from modelport.serving.routing.replicas import PerVersionReplicas
from modelport.serving.types import VersionRef
from modelport.tenancy.types import Principal
from modelport.testing.toy_engine import TOY_FORMAT, ToyEngine
from tests.conftest import free_port
from tests.registry.helpers import put_blob
from tests.serving.conftest import Serving, ServingFactory
from tests.serving.sse_server import MODEL, SseServer

PROMPT = "the quick brown fox jumps"
CALLER = Principal(id="acme/app", roles=frozenset({"consumer"}), tenant="acme", key_id="k1")
TEXT_IO: dict[str, Any] = {
    "inputs": [{"name": "prompt", "datatype": "BYTES", "shape": [1]}],
    "outputs": [{"name": "text", "datatype": "BYTES", "shape": [1]}],
}


class ToyEngines:
    """A toy generative format giving each version its own engine, in the mode and with
    the delay its manifest's ``runtime`` names."""

    name = TOY_FORMAT

    def __init__(self) -> None:
        self.engines: dict[str, ToyEngine] = {}

    def estimate_memory(self, manifest: Manifest) -> int:
        return 0

    def load(self, files: dict[str, Path], manifest: Manifest, *, name: str = "") -> ToyEngine:
        runtime = manifest.runtime
        engine = ToyEngine(str(runtime.get("mode", "echo")), float(runtime.get("delay", 0)))
        self.engines[str(runtime["label"])] = engine
        return engine


@dataclass
class Rig:
    serving: Serving
    toys: ToyEngines
    server: SseServer
    remotes: dict[str, RemoteOpenAIBackend]

    @property
    def services(self) -> Any:
        return self.serving.services

    def publish(self, ref: str, manifest: dict[str, Any]) -> VersionRef:
        owner, name, version = ref.replace(":", "/").split("/")
        registry = self.services.registry
        try:
            registry.get_model(owner, name)
        except ModelportError:
            registry.create_model(owner, name, actor="test", license="MIT")
        data = f"weights of {ref}".encode()
        digest = put_blob(self.services.blob_store, data)
        files = [{"path": "w.bin", "digest": digest, "size": len(data)}]
        body = {"files": files, "license": "MIT", **TEXT_IO, **manifest}
        registry.publish(owner, name, version, body, actor="test")
        self.serving.force_state(owner, name, version, "approved")
        return asyncio.run(self.services.inference.targets.target(owner, name, version)).ref

    def toy(self, ref: str, **runtime: Any) -> VersionRef:
        return self.publish(ref, {"format": TOY_FORMAT, "runtime": {"label": ref, **runtime}})

    def remote_llm(self, ref: str = "acme/llm:1") -> VersionRef:
        return self.publish(
            ref, {"format": "gguf", "runtime": {"protocol": "openai", "task": "chat"}}
        )

    def install(
        self,
        endpoint: str,
        versions: list[tuple[VersionRef, int, tuple[str, ...]]],
        *,
        shadow: VersionRef | None = None,
        fallback: VersionRef | None = None,
        deadline_ms: int = 10_000,
    ) -> int:
        """Create the endpoint and route to ``versions`` as an active deployment would."""
        fields: dict[str, Any] = {"deadline_ms": deadline_ms}
        if fallback is not None:
            step = {"kind": "version", "model": fallback.model, "version": fallback.version}
            fields["fallback"] = {"steps": [step]}
        self.serving.endpoint(endpoint, **fields)
        base = self.services.serving.endpoints.route(endpoint)
        route = dataclasses.replace(
            base,
            # Newer than any rebuild from the database (which knows no deployment here).
            endpoint=dataclasses.replace(base.endpoint, revision=base.endpoint.revision + 1000),
            deployment=1,
            versions=tuple(v for v, _, _ in versions),
            weights=tuple(w for _, w, _ in versions),
            shadow=shadow,
            backends={v.ref: b for v, _, b in versions},
            fallbacks={fallback.ref: fallback} if fallback is not None else {},
        )
        self.services.serving.router.install(route)
        return 1

    def price(self, model: str, rule: FailureRule = FailureRule.NONE, bps: int = 0) -> None:
        for unit, micros in ((Unit.INPUT_TOKEN, 10), (Unit.OUTPUT_TOKEN, 100)):
            self.services.metering.prices.add(
                NewPriceRule(
                    model=model,
                    unit=unit,
                    unit_price_micros=micros,
                    failure_rule=rule,
                    failure_bps=bps,
                ),
                actor="t",
            )

    def events(self, prediction_id: str) -> dict[Unit, UsageEvent]:
        self.services.metering.deliver()
        return {
            e.event.unit: e.event
            for e in self.services.metering.ledger.entries()
            if e.event.prediction_id == prediction_id
        }

    def breaker_failures(self, name: str) -> int:
        return self.services.health.board.breaker(name).snapshot().failures


@pytest.fixture
def rig(make_serving: ServingFactory, database_url: str, tmp_path: Path) -> Iterator[Rig]:
    serving = make_serving(database_url, serving_refresh_seconds=3600)
    services = serving.services
    serving.ensure_tenant("acme")
    toys = ToyEngines()
    cache = ModelCache(tmp_path / "toy-cache")
    engines = GenerativeHost(cache=cache, formats={TOY_FORMAT: toys})

    def local(name: str) -> LocalBackend:
        return LocalBackend(services.host, services.blob_store, name=name, engines=engines)

    replicas = PerVersionReplicas(local)
    services.serving.router.replicas_for = replicas
    services.inference.replicas_for = replicas
    server = SseServer().start()
    remotes = {
        "oa-1": RemoteOpenAIBackend(
            "oa-1",
            server.url,
            formats=frozenset({"gguf"}),
            models={"acme/llm": MODEL},
            clock=services.clock,
        ),
        "oa-dead": RemoteOpenAIBackend(
            "oa-dead",
            f"http://127.0.0.1:{free_port()}",
            formats=frozenset({"gguf"}),
            clock=services.clock,
        ),
    }
    services.serving.router.remotes = remotes.get
    BalanceRepository(services.database).credit(
        BalanceScope.TENANT, "acme", 1_000_000, tenant="acme"
    )
    yield Rig(serving, toys, server, remotes)
    server.stop()
    engines.close()


async def start(rig: Rig, endpoint: str, timeout: float = 10.0, **fields: Any) -> CallStream:
    fields.setdefault("prompt", PROMPT)
    fields.setdefault("max_tokens", 16)
    return await rig.services.inference.stream(
        Caller(CALLER, request_id="req-1"),
        EndpointTarget(endpoint),
        GenerateRequest(**fields),
        rig.services.clock.monotonic() + timeout,  # a deadline is on the services' clock
    )


async def drain(stream: CallStream) -> list[str]:
    async with stream:
        return [chunk.text async for chunk in stream]


def test_an_endpoint_streams_its_version_metered_logged_and_counted(rig: Rig) -> None:
    writer = rig.toy("acme/writer:1")
    rig.price("acme/writer")
    deployment = rig.install("chat", [(writer, 100, ("local",))])

    async def scenario() -> tuple[list[str], CallStream]:
        stream = await start(rig, "chat")
        return await drain(stream), stream

    texts, stream = asyncio.run(scenario())
    assert "".join(texts) == PROMPT
    assert stream.status is UsageStatus.SUCCEEDED
    events = rig.events(stream.prediction_id)
    assert {u: (e.quantity, e.amount_micros) for u, e in events.items()} == {
        Unit.INPUT_TOKEN: (5, 50),
        Unit.OUTPUT_TOKEN: (5, 500),
    }
    assert {(e.endpoint, e.model, e.version) for e in events.values()} == {
        ("chat", "acme/writer", "1")
    }
    window = rig.services.serving.router.stats.window(deployment, writer.ref)
    assert (window.requests, window.errors) == (1, 0)
    asyncio.run(rig.services.prediction_log.flush())
    record = PredictionRepository(rig.services.database).get(stream.prediction_id)
    assert record is not None
    assert (record.endpoint, record.model, record.version, record.status) == (
        "chat",
        "acme/writer",
        "1",
        "ok",
    )
    assert record.answer_label == PROMPT and record.arm == "stable"
    assert all(e.compute_ms > 0 for e in events.values())  # the engine's time for it

    # The month's invoice and the publisher's statement show the tokens per line.
    period = f"{events[Unit.OUTPUT_TOKEN].finished_at:%Y-%m}"
    generated = rig.services.billing.generate(period)
    (invoice,) = [i for i in generated.invoices if i.content.tenant == "acme"]
    lines = {line.unit: (line.quantity, line.amount_micros) for line in invoice.content.lines}
    assert lines == {"input_token": (5, 50), "output_token": (5, 500)}
    (statement,) = [s for s in generated.statements if s.publisher == "acme"]
    assert {line.unit: line.quantity for line in statement.content.lines} == {
        "input_token": 5,
        "output_token": 5,
    }


def test_a_subject_sticks_to_one_version_of_a_canary(rig: Rig) -> None:
    one, two = rig.toy("acme/writer:1"), rig.toy("acme/writer:2", mode="count")
    rig.install("chat", [(one, 50, ("local",)), (two, 50, ("local",))])

    async def scenario() -> set[tuple[str, ...]]:
        seen = set()
        for _ in range(6):
            texts = await drain(await start(rig, "chat", subject="user-42", max_tokens=3))
            seen.add(tuple(texts))
        return seen

    assert len(asyncio.run(scenario())) == 1


def test_a_failing_remote_falls_back_to_a_local_engine_before_the_first_chunk(rig: Rig) -> None:
    llm, writer = rig.remote_llm(), rig.toy("acme/writer:1")
    rig.price("acme/llm")
    rig.price("acme/writer")
    rig.install("chat", [(llm, 100, ("oa-1",))], fallback=writer)
    rig.server.status = 500

    async def scenario() -> tuple[list[str], CallStream]:
        stream = await start(rig, "chat")
        return await drain(stream), stream

    texts, stream = asyncio.run(scenario())
    assert "".join(texts) == PROMPT  # the local echo answered
    assert len(rig.server.calls) == 1 and rig.breaker_failures("oa-1") == 1
    events = rig.events(stream.prediction_id)
    assert {(e.model, e.version, e.status) for e in events.values()} == {
        ("acme/writer", "1", UsageStatus.SUCCEEDED)  # billed as the version that ran
    }
    asyncio.run(rig.services.prediction_log.flush())
    record = PredictionRepository(rig.services.database).get(stream.prediction_id)
    assert record is not None and (record.model, record.fallback) == ("acme/writer", "version")


def test_after_the_first_chunk_a_failure_ends_the_stream_without_fallback(rig: Rig) -> None:
    llm, writer = rig.remote_llm(), rig.toy("acme/writer:1")
    rig.price("acme/llm", FailureRule.FULL)
    deployment = rig.install("chat", [(llm, 100, ("oa-1",))], fallback=writer)
    rig.server.break_after = 2
    received: list[str] = []

    async def scenario() -> CallStream:
        stream = await start(rig, "chat")
        with pytest.raises(Unavailable):
            async with stream:
                async for chunk in stream:
                    received.append(chunk.text)
        return stream

    stream = asyncio.run(scenario())
    assert "".join(received) == "the quick"
    assert stream.status is UsageStatus.FAILED
    assert rig.toys.engines == {}  # the fallback never ran
    events = rig.events(stream.prediction_id)
    out = events[Unit.OUTPUT_TOKEN]
    assert (out.model, out.quantity, out.status, out.amount_micros) == (
        "acme/llm",
        2,
        UsageStatus.FAILED,
        200,
    )
    # The server never said how long the prompt was: estimated from its bytes.
    assert events[Unit.INPUT_TOKEN].quantity == -(-len(PROMPT) // 4)
    window = rig.services.serving.router.stats.window(deployment, llm.ref)
    assert (window.requests, window.errors) == (1, 1)
    assert rig.breaker_failures("oa-1") == 1


def test_a_dead_replica_counts_on_its_breaker_and_the_next_one_streams(rig: Rig) -> None:
    llm = rig.remote_llm()
    rig.price("acme/llm")
    rig.install("chat", [(llm, 100, ("oa-dead", "oa-1"))])

    async def scenario() -> tuple[list[str], CallStream]:
        stream = await start(rig, "chat")
        return await drain(stream), stream

    texts, stream = asyncio.run(scenario())
    assert "".join(texts) == PROMPT
    assert rig.breaker_failures("oa-dead") == 1 and rig.breaker_failures("oa-1") == 0
    assert rig.server.call_ids == [stream._metered.reservation.id]  # type: ignore[union-attr]
    events = rig.events(stream.prediction_id)
    # The server's own usage, reported at the end of its stream.
    assert {u: e.quantity for u, e in events.items()} == {
        Unit.INPUT_TOKEN: 5,
        Unit.OUTPUT_TOKEN: 5,
    }


def test_the_shadow_gets_a_drained_copy_compared_and_never_billed(rig: Rig) -> None:
    one, two = rig.toy("acme/writer:1"), rig.toy("acme/writer:2", mode="count")
    rig.price("acme/writer")
    deployment = rig.install("chat", [(one, 100, ("local",))], shadow=two)
    router = rig.services.serving.router

    async def scenario() -> CallStream:
        stream = await start(rig, "chat")
        await drain(stream)
        await router.shadow.drain()
        return stream

    stream = asyncio.run(scenario())
    shadow_engine = rig.toys.engines["acme/writer:2"]
    assert [r.request.priority for r in shadow_engine.records] == [Priority.BATCH]
    assert shadow_engine.records[0].produced == 16  # drained to its end
    stats, recent = router.stats.shadow(deployment, two.ref)
    assert (stats.requests, stats.errors, stats.disagreements) == (1, 0, 1)
    assert recent[0]["detail"] == "output 'text' differs"
    assert recent[0]["prediction_id"] == stream.prediction_id  # the copied prediction
    rig.services.metering.deliver()
    billed = {e.event.model + ":" + e.event.version for e in rig.services.metering.ledger.entries()}
    assert billed == {"acme/writer:1"}  # the copy is nobody's bill
    assert {e.quantity for e in rig.events(stream.prediction_id).values()} == {5}


def test_the_endpoints_deadline_cuts_the_stream(rig: Rig) -> None:
    # The endpoint's 2 s pass on the services' clock after the third token: the deadline
    # is read there, so no real wait (a token each 0.05 s keeps the stream running).
    slow = rig.toy("acme/writer:1", mode="count", delay=0.05)
    rig.price("acme/writer", FailureRule.FRACTION, 5000)
    deployment = rig.install("chat", [(slow, 100, ("local",))], deadline_ms=2000)
    received: list[str] = []

    async def scenario() -> CallStream:
        stream = await start(rig, "chat", max_tokens=100)  # the caller allows 10 s
        with pytest.raises(DeadlineExceeded):
            async with stream:
                async for chunk in stream:
                    received.append(chunk.text)
                    if len(received) == 3:
                        rig.serving.clock.advance(2.0)
        return stream

    stream = asyncio.run(scenario())
    assert 3 <= len(received) < 100 and stream.status is UsageStatus.TIMEOUT
    out = rig.events(stream.prediction_id)[Unit.OUTPUT_TOKEN]
    assert (out.quantity, out.status) == (len(received), UsageStatus.TIMEOUT)
    assert out.amount_micros == len(received) * 100 // 2
    assert rig.toys.engines["acme/writer:1"].records[0].cancelled  # the engine stopped
    window = rig.services.serving.router.stats.window(deployment, slow.ref)
    assert (window.requests, window.errors) == (1, 1)
