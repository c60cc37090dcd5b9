"""Generative streams over the worker pool, in one test process on the real PostgreSQL
and Redis: a gateway and two workers built as their roles build them (the workers' OIP
gRPC servers on loopback), their periodic steps driven by hand. The workers run the
test engine (``HeldEngine``: it counts ``1 2 3 ...``, and can hold a stream after some
tokens until it is cancelled, a gate instead of a race). Calls come through the
gateway's ``/v1`` with the official ``openai`` SDK and a consumer's key (and its public
gRPC ``ModelStreamInfer`` with ``tritonclient``): streamed and whole, billed once on
the gateway; a worker's server stopped abruptly mid-stream ends
the stream with a ``worker_lost`` error event, billed for what was delivered, while a
call not yet started goes to the other replica; a stream the gateway closes, or whose
deadline passes, stops the generation on the worker."""

from __future__ import annotations

import asyncio
import platform
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import openai
import orjson
import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from modelport.api.grpc.worker_backend import WORKER_LOST, WorkerChannels
from modelport.api.worker import create_worker_app
from modelport.app import build_worker_services
from modelport.clock import ManualClock, SystemClock
from modelport.config import Role
from modelport.errors import DeadlineExceeded
from modelport.metering.ledger import Ledger
from modelport.metering.types import BalanceScope
from modelport.runtime.types import ChatMessage, GenerationChunk, GenerationRequest
from modelport.serving.types import StreamRequest, VersionRef
from modelport.testing.toy_engine import TOY_FORMAT, ToyEngine, ToyGenerativeFormat, ToyRecord
from tests.api_grpc.test_stream import Stream
from tests.conftest import free_port, skip_or_fail
from tests.databases import truncate_tables
from tests.polling import eventually
from tests.serving.conftest import Serving, ServingFactory
from tests.serving.pool.conftest import TOKEN, drive, pool_of, reset_pool_keys
from tests.serving.pool.conftest import Worker as PoolWorker

# The SDK's platform headers ask for the processor (``uname -p``, once per process):
# asked at collection, so no test is taken for one starting processes.
platform.processor()

TEXT = [{"name": "text", "datatype": "BYTES", "shape": [-1]}]
HELLO = [{"role": "user", "content": "hello pool"}]


class HeldGeneration:
    """One request of ``HeldEngine``."""

    def __init__(self, engine: HeldEngine, record: ToyRecord) -> None:
        self._engine = engine
        self._record = record
        self.input_tokens = 2

    def __aiter__(self) -> AsyncIterator[GenerationChunk]:
        return self._chunks()

    async def _chunks(self) -> AsyncIterator[GenerationChunk]:
        record, total = self._record, self._record.request.max_tokens
        for i in range(total):
            if self._engine.hold_after is not None and i >= self._engine.hold_after:
                # Asked for the next token: the ones before it were handed over.
                self._engine.holding += 1
                await asyncio.Event().wait()  # held until the stream is cancelled
            record.produced += 1
            last = i == total - 1
            record.finished = last
            yield GenerationChunk(
                text=str(i + 1) if i == 0 else f" {i + 1}",
                tokens=1,
                finish_reason="length" if last else None,
            )

    def cancel(self) -> None:
        if not self._record.finished:
            self._record.cancelled = True


class HeldEngine(ToyEngine):
    """Counts ``1 2 3 ...``; with ``hold_after``, holds each stream after that many tokens."""

    hold_after: int | None = None
    holding = 0
    """Streams it holds (each asked for a token past ``hold_after``)."""

    def submit(self, request: GenerationRequest) -> HeldGeneration:  # type: ignore[override]
        record = ToyRecord(request)
        self.records.append(record)
        return HeldGeneration(self, record)


@dataclass
class Worker(PoolWorker):
    engine: HeldEngine

    def halt(self) -> None:
        """Stop its gRPC server at once: its calls are cut, as a killed worker's are."""
        assert self.services.pool is not None
        server = self.services.pool.server.grpc_server
        assert server is not None and self.client.portal is not None
        self.client.portal.call(server.stop, None)


@dataclass
class World:
    gateway: Serving
    workers: list[Worker]
    key: str
    """beta's consumer key."""

    def openai(self) -> openai.OpenAI:
        return openai.OpenAI(
            base_url="http://testserver/v1",
            api_key=self.key,
            http_client=self.gateway.client,
            max_retries=0,
        )

    def output_tokens(self) -> list[int]:
        """The output tokens of each of beta's calls, as the gateway's ledger has them."""
        return [quantity for quantity, _ in self.output_events()]

    def output_events(self) -> list[tuple[int, str]]:
        """Each of beta's calls' output tokens and how the call ended."""
        self.gateway.services.metering.deliver()
        entries = Ledger(self.gateway.services.database).entries(tenant="beta")
        return [
            (e.event.quantity, e.event.status.value)
            for e in entries
            if e.event.unit == "output_token"
        ]


@pytest.fixture
def gateway(make_serving: ServingFactory, postgres_url: str | None, redis_url: str) -> Serving:
    """A pool gateway serving gRPC too (its public OIP surface)."""
    if postgres_url is None:
        skip_or_fail("the pool needs PostgreSQL (MODELPORT_TEST_DATABASE_URL)")
    assert postgres_url is not None
    truncate_tables(postgres_url)  # another test's placements and versions
    reset_pool_keys(redis_url)
    return make_serving(
        postgres_url,
        role=Role.GATEWAY,
        redis_url=redis_url,
        worker_token=TOKEN,
        worker_replicas=2,
        grpc_port=free_port(),
    )


@pytest.fixture
def world(gateway: Serving) -> Iterator[World]:
    workers: list[Worker] = []
    for name in ("w1", "w2"):
        engine = HeldEngine(mode="count")
        settings = gateway.services.settings.model_copy(
            update={
                "role": Role.WORKER,
                "home": gateway.services.settings.store.home.parent / name,
                "worker_id": f"{name}-{uuid.uuid4().hex[:6]}",
                "grpc_port": free_port(),
                "blob_url": str(gateway.services.settings.store.home / "blobs"),
            }
        )
        services = build_worker_services(
            settings,
            clock=ManualClock(),
            generative_formats={TOY_FORMAT: ToyGenerativeFormat(engine)},
        )
        client = TestClient(create_worker_app(services))
        client.__enter__()
        workers.append(Worker(client, services, engine))
    try:
        pool = pool_of(gateway)
        drive(gateway, workers, lambda: len(pool.view.workers) == 2)  # type: ignore[arg-type]
        tenancy = gateway.services.tenancy
        gateway.ensure_tenant("beta")
        tenancy.add_member("beta", "app", roles=["consumer"], actor="admin")
        key = tenancy.create_key("beta", "app", name="test", actor="admin").secret
        gateway.services.metering.balances.credit(
            BalanceScope.TENANT, "beta", 10_000_000, tenant="beta"
        )
        gateway.publish(
            "acme/talker",
            "1",
            visibility="public",
            format=TOY_FORMAT,
            inputs=TEXT,
            outputs=TEXT,
            runtime={"task": "chat"},
        )
        gateway.endpoint("talk", tenant="beta")
        deployed = gateway.deploy(
            "talk",
            [("acme/talker:1", 100)],
            wait=False,
            resources={"min_replicas": 2, "max_replicas": 2},
        )
        drive(
            gateway,
            workers,  # type: ignore[arg-type]
            lambda: (
                gateway.deployment("talk", deployed["id"])["state"] == "active"
                and len(pool.view.ready("acme/talker:1")) == 2
            ),
        )
        yield World(gateway, workers, key)
    finally:
        for worker in workers:
            worker.client.__exit__(None, None, None)
            worker.services.close()


def test_streamed_and_whole_chats_run_on_the_workers_and_are_billed_once(world: World) -> None:
    client = world.openai()
    whole = client.chat.completions.create(model="talk", messages=HELLO, max_tokens=5)  # type: ignore[arg-type]
    assert whole.choices[0].message.content == "1 2 3 4 5"
    assert whole.usage is not None and whole.usage.completion_tokens == 5
    streamed = "".join(
        chunk.choices[0].delta.content or ""
        for chunk in client.chat.completions.create(
            model="talk",
            messages=HELLO,  # type: ignore[arg-type]
            max_tokens=4,
            stream=True,
        )
        if chunk.choices
    )
    assert streamed == "1 2 3 4"
    # Each call ran once on a worker; the workers meter nothing, the gateway once each.
    assert sum(len(w.engine.records) for w in world.workers) == 2
    assert sorted(world.output_tokens()) == [4, 5]


def attempts(serving: Serving, backend: str) -> float:
    text = serving.client.get("/metrics").text
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "modelport_serving_attempts_total"
        and sample.labels.get("backend") == backend
        and sample.labels.get("outcome") != "ok"
    )


def test_a_worker_lost_mid_stream_ends_it_with_an_error_event_billed_for_what_came(
    world: World,
) -> None:
    for worker in world.workers:
        worker.engine.hold_after = 3

    def held() -> Worker | None:
        return next((w for w in world.workers if w.engine.holding), None)

    lost: list[Worker] = []

    def halt_when_held() -> None:
        assert eventually(lambda: held() is not None, 60)
        victim = held()
        assert victim is not None
        lost.append(victim)
        victim.halt()

    killer = threading.Thread(target=halt_when_held)
    killer.start()
    response = world.gateway.client.post(
        "/v1/chat/completions",
        json={"model": "talk", "messages": HELLO, "max_tokens": 10, "stream": True},
        headers={"Authorization": f"Bearer {world.key}"},
    )
    killer.join()
    assert response.status_code == 200, response.text
    events = [
        orjson.loads(line.removeprefix("data: "))
        for line in response.text.splitlines()
        if line.startswith("data: {")
    ]
    text = "".join(
        e["choices"][0]["delta"].get("content") or "" for e in events if e.get("choices")
    )
    errors = [e["error"] for e in events if "error" in e]
    assert text == "1 2 3"
    assert [e["code"] for e in errors] == [WORKER_LOST]
    assert world.output_events() == [(3, "failed")]  # what was delivered, once

    # Calls not started go to the other replica: the lost one's attempts fail first.
    (victim,) = lost
    for worker in world.workers:
        worker.engine.hold_after = None
    client = world.openai()
    for _ in range(2):
        answer = client.chat.completions.create(model="talk", messages=HELLO, max_tokens=2)  # type: ignore[arg-type]
        assert answer.choices[0].message.content == "1 2"
    assert attempts(world.gateway, f"worker:{victim.id}") >= 1
    assert sorted(world.output_tokens()) == [2, 2, 3]


def stream_request(version: VersionRef, deadline: float) -> StreamRequest:
    return StreamRequest(
        version=version,
        prompt="",
        messages=(ChatMessage("user", "hello pool"),),
        max_tokens=10,
        deadline=deadline,
        task="chat",
        call_id="call-1",
    )


def test_closing_a_stream_or_its_deadline_stops_the_generation_on_the_worker(
    world: World,
) -> None:
    worker = world.workers[0]
    worker.engine.hold_after = 2
    stored = world.gateway.services.registry.get_version("acme", "talker", "1")
    version = VersionRef("acme/talker", "1", stored.manifest_digest, stored.manifest)
    info = pool_of(world.gateway).view.workers[worker.id]
    clock = SystemClock()

    async def closed_after_two() -> list[str]:
        channels = WorkerChannels(world.gateway.services.settings.pool.token, 1 << 20, clock)
        try:
            chunks = channels.backend(info).stream(stream_request(version, clock.monotonic() + 60))
            texts = [(await anext(chunks)).text for _ in range(3)]  # input tokens, "1", " 2"
            await chunks.aclose()  # type: ignore[attr-defined]
            return texts
        finally:
            await channels.close()

    assert asyncio.run(closed_after_two()) == ["", "1", " 2"]
    first = worker.engine.records[-1]
    assert eventually(lambda: first.cancelled, 30)
    assert first.request.max_tokens == 10 and not first.finished

    async def past_its_deadline() -> None:
        channels = WorkerChannels(world.gateway.services.settings.pool.token, 1 << 20, clock)
        try:
            # Held after two tokens: only the gRPC deadline the gateway set ends it.
            async for _ in channels.backend(info).stream(
                stream_request(version, clock.monotonic() + 1.0)
            ):
                pass
        finally:
            await channels.close()

    with pytest.raises(DeadlineExceeded):
        asyncio.run(past_its_deadline())
    second = worker.engine.records[-1]
    assert second is not first
    assert eventually(lambda: second.cancelled, 30)


def test_the_public_grpc_surface_streams_from_a_worker(world: World) -> None:
    grpc = world.gateway.services.grpc
    assert grpc is not None
    stream = Stream(grpc.port, world.key)
    try:
        stream.send("talk", "hello pool", max_tokens=3)
        chunks, final = stream.call()
    finally:
        stream.close()
    assert "".join(chunks) == "1 2 3"
    assert final["output_tokens"] == 3
    assert sum(len(w.engine.records) for w in world.workers) == 1
    assert world.output_tokens() == [3]


class _Waiting:
    """A scheduler with three sequences waiting, each 0.5 s behind the one before."""

    waiting_count = 3

    def predicted_wait(self, sequences: int) -> float:
        return 0.5 * sequences


def test_a_workers_heartbeat_carries_its_generative_schedulers_predicted_wait(
    world: World,
) -> None:
    pool = pool_of(world.gateway)
    worker = world.workers[0]
    worker.engine.scheduler = _Waiting()  # type: ignore[attr-defined]
    worker.step()
    drive(
        world.gateway,
        world.workers,  # type: ignore[arg-type]
        lambda: (
            {w.id: w.waits.get("acme/talker:1") for w in pool.view.ready("acme/talker:1")}
            == {worker.id: 1.5, world.workers[1].id: 0.0}
        ),
    )
