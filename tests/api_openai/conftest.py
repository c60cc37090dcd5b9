"""/v1 fixtures: a live server whose platform hosts a chat model served by a toy
generative engine and an embedding model of an in-test tensor format, both published
by tenant acme (public, approved), called by tenant beta's consumer key through the
official ``openai`` SDK."""

from __future__ import annotations

import asyncio
import os
import platform
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import openai
import pytest
from starlette.testclient import TestClient

from modelport.api import create_app
from modelport.app import Services, build_services
from modelport.clock import Clock
from modelport.config import Settings
from modelport.errors import InvalidInput, Unavailable
from modelport.manifest import Manifest
from modelport.metering.types import BalanceScope, LedgerEntry
from modelport.runtime.formats import registry as format_registry
from modelport.runtime.types import GenerationChunk, GenerationRequest
from modelport.testing.toy_engine import (
    ToyEngine,
    ToyGeneration,
    ToyGenerativeFormat,
    ToyRecord,
)
from tests.conftest import ADMIN_KEY, LiveServer
from tests.databases import migrated_sqlite
from tests.metering.conftest import approve
from tests.polling import eventually
from tests.registry.helpers import put_blob

os.environ.setdefault("OMP_NUM_THREADS", "1")
# The SDK's platform headers ask for the processor, which runs ``uname -p`` once per
# process: asked here, at collection, so no test is taken for one starting processes.
platform.processor()

FAILING_WORD = "boom"
"""A word the chat engine fails on when it comes to say it."""
CONTEXT_LENGTH = 2048
CHAT_FORMAT = "toy-chat"
SLOW_FORMAT = "toy-slow"
EMBED_FORMAT = "test-embed"
DIMENSIONS = 4


# ---- the chat engine: the toy engine, with chats, choices, stop words and logprobs
def rendered(request: GenerationRequest) -> str:
    """The prompt the toy answers: a chat's contents in order (its "template")."""
    if request.messages is None:
        return request.prompt
    return " ".join(m.content for m in request.messages)


class ChatToyGeneration(ToyGeneration):
    """``ToyGeneration`` for ``n`` choices: choice ``c`` echoes the prompt's words
    rotated by ``c`` (or counts); a word in ``stop`` ends its choice (``stop``) unsaid."""

    def __init__(self, engine: ToyEngine, record: ToyRecord) -> None:
        super().__init__(engine, record)
        self.input_tokens = len(rendered(record.request).split())

    async def _chunks(self) -> AsyncIterator[GenerationChunk]:
        record, request = self._record, self._record.request
        words = rendered(request).split()
        stops = set(request.parameters.get("stop") or ())  # type: ignore[call-overload]
        logprobs = bool(request.parameters.get("logprobs"))
        running = list(range(request.n))
        for i in range(request.max_tokens):
            for c in list(running):
                if record.cancelled:
                    return
                if self._engine.delay:
                    await asyncio.sleep(self._engine.delay)
                if record.cancelled:
                    return
                mine = words[c:] + words[:c]
                word = str(i + 1) if self._engine.mode == "count" else mine[i]
                if word == FAILING_WORD:
                    raise Unavailable("the engine failed", code="engine_failed")
                if word in stops:
                    running.remove(c)
                    yield GenerationChunk("", 0, "stop", c)
                    continue
                last_word = self._engine.mode != "count" and i == len(mine) - 1
                reason = "stop" if last_word else "length" if i == request.max_tokens - 1 else None
                record.produced += 1
                yield GenerationChunk(
                    word if i == 0 else f" {word}",
                    1,
                    reason,
                    c,
                    (-0.5,) if logprobs else None,
                )
                if reason is not None:
                    running.remove(c)
            if not running:
                break
        record.finished = True


class ChatToyEngine(ToyEngine):
    """Refuses a request that can never fit its ``context_length`` (prompt words plus
    ``max_tokens``), as a real engine does, before anything is allocated."""

    context_length: int | None = None

    def submit(self, request: GenerationRequest) -> ChatToyGeneration:
        needed = len(rendered(request).split()) + request.max_tokens
        if self.context_length is not None and needed > self.context_length:
            raise InvalidInput(
                f"{needed} tokens do not fit the context of {self.context_length}",
                code="context_length_exceeded",
            )
        record = ToyRecord(request)
        self.records.append(record)
        return ChatToyGeneration(self, record)


# ---- the embedding model: an in-test tensor format with the embeddings contract
def embed(text: bytes) -> tuple[list[float], int]:
    """A text's embedding and its tokens (its words, and two markers)."""
    words = text.split()
    vector = [float(len(words)), float(len(text)), float(sum(text) % 101), float(text[0])]
    return vector, len(words) + 2


class EmbedModel:
    def execute(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        pairs = [embed(t) for t in inputs["text"].ravel()]
        return {
            "embedding": np.array([v for v, _ in pairs], dtype=np.float32),
            "tokens": np.array([n for _, n in pairs], dtype=np.int64),
        }

    def memory_bytes(self) -> int:
        return 0

    def unload(self) -> None:
        pass


class EmbedFormat:
    name = EMBED_FORMAT

    def estimate_memory(self, manifest: Manifest) -> int:
        return 0

    def load(self, files: dict[str, Path], manifest: Manifest) -> EmbedModel:
        return EmbedModel()


EMBED_ENTRY = EntryPoint(EMBED_FORMAT, f"{__name__}:EmbedFormat", format_registry.GROUP)


# ---- the platform
@dataclass
class World:
    url: str
    services: Services
    admin: TestClient
    engine: ChatToyEngine
    slow: ChatToyEngine
    key: str
    """beta's consumer key."""
    key_id: str
    server: LiveServer
    clients: list[openai.OpenAI] = field(default_factory=list)
    """Every client made by ``client``: closed with the world, none left to a finaliser."""

    def client(self, key: str | None = None, **options: Any) -> openai.OpenAI:
        made = openai.OpenAI(
            base_url=self.url + "/v1", api_key=key or self.key, max_retries=0, **options
        )
        self.clients.append(made)
        return made

    def close(self) -> None:
        for made in self.clients:
            made.close()
        self.server.stop()
        self.services.close()

    def async_client(self, key: str | None = None) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(base_url=self.url + "/v1", api_key=key or self.key, max_retries=0)

    def price(self, model: str, unit: str, micros: int, **fields: Any) -> None:
        body = {"model": model, "unit": unit, "unit_price_micros": micros, **fields}
        response = self.admin.post("/api/prices", json=body)
        assert response.status_code == 201, response.text

    def credit(self, micros: int) -> None:
        self.services.metering.balances.credit(BalanceScope.TENANT, "beta", micros, tenant="beta")

    def balance(self) -> tuple[int, int]:
        self.services.metering.deliver()
        balance = self.services.metering.balances.get(BalanceScope.TENANT, "beta")
        return balance.balance_micros, balance.reserved_micros

    def deploy(self, endpoint: str, ref: str) -> None:
        """Make beta's ``endpoint`` and deploy ``ref`` (``owner/name:version``) to it,
        through the live server: its controller rolls the deployment out on the
        server's own loop. Returns once the deployment is active and routed."""
        admin = httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {ADMIN_KEY}"})
        with admin:
            created = admin.post("/api/endpoints", json={"name": endpoint, "tenant": "beta"})
            assert created.status_code == 201, created.text
            model, version = ref.split(":")
            deployed = admin.post(
                f"/api/endpoints/{endpoint}/deployments",
                json={"versions": [{"model": model, "version": version, "weight": 100}]},
            )
            assert deployed.status_code == 202, deployed.text
            ident = deployed.json()["id"]
            router = self.services.serving.router

            def routed() -> bool:
                state = admin.get(f"/api/endpoints/{endpoint}/deployments/{ident}").json()["state"]
                assert state in ("pending", "active"), state
                route = router.table.find(endpoint)
                return state == "active" and route is not None and route.deployment == ident

            assert eventually(routed, 30), "the deployment was never routed"

    def entries(self) -> list[LedgerEntry]:
        self.services.metering.deliver()
        return self.services.metering.ledger.entries()


def publish(
    admin: TestClient,
    services: Services,
    ref: str,
    fmt: str,
    task: str,
    *,
    visibility: str = "public",
    approved: bool = True,
    **manifest: Any,
) -> None:
    """Publish ``ref`` version 1 (a file of made-up weights), approved unless not."""
    owner, name = ref.split("/")
    created = admin.post(
        "/api/models",
        json={
            "owner": owner,
            "name": name,
            "license": "MIT",
            "visibility": visibility,
            "task": task,
        },
    )
    assert created.status_code == 201, created.text
    data = f"{ref} weights".encode()
    digest = put_blob(services.blob_store, data)
    doc = {
        "format": fmt,
        "files": [{"path": "model.bin", "digest": digest, "size": len(data)}],
        "license": "MIT",
        **manifest,
    }
    response = admin.post(f"/api/models/{ref}/versions", json={"version": "1", "manifest": doc})
    assert response.status_code == 201, response.text
    if approved:
        approve(services, owner, name, "1")


TEXT_IO = {
    "inputs": [{"name": "text", "datatype": "BYTES", "shape": [-1]}],
    "outputs": [{"name": "text", "datatype": "BYTES", "shape": [-1]}],
}
EMBED_IO = {
    "inputs": [{"name": "text", "datatype": "BYTES", "shape": [-1]}],
    "outputs": [
        {"name": "embedding", "datatype": "FP32", "shape": [-1, DIMENSIONS]},
        {"name": "tokens", "datatype": "INT64", "shape": [-1]},
    ],
}


def build_world(
    home: Path,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
    *,
    clock: Clock | None = None,
    **options: Any,
) -> World:
    # The embedding format is installed as a plugin would be (an entry point).
    plugins = format_registry.discover([EMBED_ENTRY])
    monkeypatch.setattr(format_registry, "installed_formats", lambda: plugins)
    engine, slow = ChatToyEngine(), ChatToyEngine(mode="count", delay=0.02)
    engine.context_length = CONTEXT_LENGTH
    settings = Settings(
        home=home,
        database_url=database_url,
        admin_key=ADMIN_KEY,
        auto_migrate=database_url.startswith("sqlite"),
        runtime_intra_op_threads=1,
        **options,
    )
    services = build_services(
        settings,
        clock=clock,
        generative_formats={
            CHAT_FORMAT: ToyGenerativeFormat(engine),
            SLOW_FORMAT: ToyGenerativeFormat(slow),
        },
    )
    # No lifespan here: the live server runs the application's.
    admin = TestClient(create_app(services), headers={"Authorization": f"Bearer {ADMIN_KEY}"})
    tenancy = services.tenancy
    for slug in ("acme", "beta"):
        tenancy.create_tenant(slug, actor="admin")
    tenancy.add_member("beta", "app", roles=["consumer"], actor="admin")
    created = tenancy.create_key("beta", "app", name="test", actor="admin")
    publish(admin, services, "acme/writer", CHAT_FORMAT, "chat", **TEXT_IO)
    publish(admin, services, "acme/counter", SLOW_FORMAT, "completions", **TEXT_IO)
    publish(admin, services, "acme/embedder", EMBED_FORMAT, "embeddings", **EMBED_IO)
    server = LiveServer(services).start()
    return World(server.url, services, admin, engine, slow, created.secret, created.key.id, server)


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    """The platform on SQLite (see the module docstring)."""
    built = build_world(tmp_path / "home", migrated_sqlite(tmp_path / "home.db"), monkeypatch)
    yield built
    built.close()


@pytest.fixture(scope="module")
def shared_world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """One platform for a module's tests that change nothing but their own calls."""
    home = tmp_path_factory.mktemp("shared")
    with pytest.MonkeyPatch.context() as monkeypatch:
        built = build_world(home / "home", migrated_sqlite(home / "home.db"), monkeypatch)
        yield built
        built.close()


@pytest.fixture
def world_on(tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    """The platform on each database (SQLite, and PostgreSQL where configured)."""
    built = build_world(tmp_path / "home", database_url, monkeypatch)
    yield built
    built.close()
