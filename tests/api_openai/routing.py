"""A routed world for ``/v1`` and ``/v2``: chat and embedding models of one task with
different prices, verified scores and engines, one of them the caller may not call,
and engines that fail on demand."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.metadata import EntryPoint
from pathlib import Path

import numpy as np

from modelport.errors import Unavailable
from modelport.evaluations import repository as evaluations
from modelport.ids import unique_id
from modelport.inference.route_facts import LatencyBoard
from modelport.manifest import Manifest
from modelport.runtime.formats import registry as format_registry
from modelport.runtime.types import GenerationRequest
from modelport.serving.types import VersionRef
from modelport.testing.toy_engine import ToyGenerativeFormat
from tests.api_openai.conftest import (
    EMBED_ENTRY,
    EMBED_IO,
    TEXT_IO,
    ChatToyEngine,
    ChatToyGeneration,
    EmbedModel,
    World,
    publish,
)

CHEAP_FORMAT, PREMIUM_FORMAT = "toy-cheap", "toy-premium"
FLAKY_EMBED_FORMAT = "test-embed-flaky"
CREDIT = 100_000_000
PRICES = {"acme/writer": 100, "acme/cheap": 10, "acme/premium": 1000, "acme/secret": 1}
"""Micro-units per output token: acme/secret (private to acme) is the cheapest."""
SCORES = {"acme/writer": 0.7, "acme/cheap": 0.4, "acme/premium": 0.9, "acme/secret": 1.0}


class FlakyEngine(ChatToyEngine):
    """A chat engine that refuses every request while ``failing`` (a backend down)."""

    failing = False

    def submit(self, request: GenerationRequest) -> ChatToyGeneration:
        if self.failing:
            raise Unavailable("the engine is down", code="engine_failed")
        return super().submit(request)


class FlakyEmbedModel(EmbedModel):
    failing = False
    calls = 0

    def execute(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        FlakyEmbedModel.calls += 1
        if FlakyEmbedModel.failing:
            raise Unavailable("the model is down", code="model_failed")
        return super().execute(inputs)


class FlakyEmbedFormat:
    name = FLAKY_EMBED_FORMAT

    def estimate_memory(self, manifest: Manifest) -> int:
        return 0

    def load(self, files: dict[str, Path], manifest: Manifest) -> FlakyEmbedModel:
        return FlakyEmbedModel()


FLAKY_EMBED_ENTRY = EntryPoint(
    FLAKY_EMBED_FORMAT, f"{__name__}:FlakyEmbedFormat", format_registry.GROUP
)


@dataclass
class Routed:
    world: World
    cheap: FlakyEngine
    premium: FlakyEngine


class Waits:
    """A predicted-wait source the test sets: seconds by model (none: no wait)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def predicted_wait(self, version: VersionRef) -> float | None:
        return self.seconds.get(version.model, 0.0)


def score(world: World, model: str, value: float, metric: str = "exact_match") -> None:
    """A verified, published evaluation of ``model`` version 1 on the chat board."""
    owner, name = model.split("/")
    task = "chat" if metric == "exact_match" else "embedding"
    now = datetime.now(UTC)
    with world.services.database.transaction() as session:
        made = evaluations.insert(
            session,
            id=unique_id(),
            kind="verified",
            tenant="acme",
            created_by="admin",
            model_owner=owner,
            model_name=name,
            model_version="1",
            version_digest="sha256:" + "0" * 64,
            dataset_owner="acme",
            dataset_name="questions",
            dataset_version="1",
            dataset_digest="sha256:" + "1" * 64,
            split="test",
            task=task,
            output="text",
            published=True,
            state="queued",
            created_at=now,
        )
        evaluations.record_result(
            session, made.id, metrics={metric: value}, rows=10, latency_ms=3.0, at=now
        )


def route_world(world: World) -> Routed:
    """``world`` with the chat models of ``PRICES``, scored by ``SCORES``; beta credited."""
    cheap, premium = FlakyEngine(), FlakyEngine()
    formats = world.services.engines.formats  # type: ignore[union-attr]
    formats[CHEAP_FORMAT] = ToyGenerativeFormat(cheap)  # type: ignore[index]
    formats[PREMIUM_FORMAT] = ToyGenerativeFormat(premium)  # type: ignore[index]
    publish(world.admin, world.services, "acme/cheap", CHEAP_FORMAT, "chat", **TEXT_IO)
    publish(world.admin, world.services, "acme/premium", PREMIUM_FORMAT, "chat", **TEXT_IO)
    publish(
        world.admin,
        world.services,
        "acme/secret",
        CHEAP_FORMAT,
        "chat",
        visibility="private",
        **TEXT_IO,
    )
    for model, micros in PRICES.items():
        world.price(model, "output_token", micros)
    for model, value in SCORES.items():
        score(world, model, value)
    world.credit(CREDIT)
    return Routed(world, cheap, premium)


def embed_world(world: World, monkeypatch: object) -> None:
    """Two embedding models of one task: acme/embedder, and the cheaper acme/quick of a
    format whose model fails on demand (``FlakyEmbedModel.failing``)."""
    plugins = format_registry.discover([EMBED_ENTRY, FLAKY_EMBED_ENTRY])
    monkeypatch.setattr(format_registry, "installed_formats", lambda: plugins)  # type: ignore[attr-defined]
    FlakyEmbedModel.failing, FlakyEmbedModel.calls = False, 0
    publish(world.admin, world.services, "acme/quick", FLAKY_EMBED_FORMAT, "embeddings", **EMBED_IO)
    world.price("acme/embedder", "prediction", 500)
    world.price("acme/quick", "prediction", 50)
    world.credit(CREDIT)


def fresh_latency(world: World, **ms: float) -> None:
    """Live latency as if measured: ``writer=5`` for acme/writer version 1."""
    routes = world.services.inference.routes
    assert routes is not None
    routes.board = LatencyBoard()
    for name, value in ms.items():
        routes.board.observe(f"acme/{name}", "1", value)
