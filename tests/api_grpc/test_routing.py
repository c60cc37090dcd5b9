"""Routing by need over gRPC through ``tritonclient.grpc``: ``ModelInfer`` of
``route:embeddings`` with the preferences in the request parameter ``route`` (or the
``modelport-route`` metadata) picks among the embedding models the caller may call, as
``/v2`` does; the answer names the version that served it, that version is billed, and a
failing first choice falls back to the next."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest
import tritonclient.grpc as triton
from tritonclient.utils import InferenceServerException

from modelport.metering.types import Unit, UsageStatus
from tests.api_openai.conftest import EMBED_FORMAT, EMBED_IO, World, build_world, publish
from tests.api_openai.routing import FlakyEmbedModel, embed_world
from tests.databases import migrated_sqlite
from tests.isolation import free_port
from tests.polling import eventually


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    home = tmp_path / "home"
    built = build_world(
        home, migrated_sqlite(tmp_path / "home.db"), monkeypatch, grpc_port=free_port()
    )
    try:
        embed_world(built, monkeypatch)
        yield built
    finally:
        built.close()


def infer(
    world: World,
    route: dict[str, Any] | None,
    *,
    metadata: str | None = None,
    version: str = "",
    model: str = "route:embeddings",
) -> tuple[Any, str]:
    grpc_surface = world.services.grpc
    assert grpc_surface is not None
    client = triton.InferenceServerClient(f"127.0.0.1:{grpc_surface.port}")
    headers = {"authorization": f"Bearer {world.key}"}
    if metadata is not None:
        headers["modelport-route"] = metadata
    try:
        text = triton.InferInput("text", [1], "BYTES")
        text.set_data_from_numpy(np.array([b"two words"], dtype=np.object_))
        result = client.infer(
            model,
            [text],
            model_version=version,
            parameters=None if route is None else {"route": json.dumps(route)},
            headers=headers,
        )
        answer = result.get_response(as_json=True)
        assert result.as_numpy("tokens").tolist() == [4]
        return answer, answer["model_name"] + ":" + answer["model_version"]
    finally:
        client.close()


def refused(world: World, route: dict[str, Any] | None, **options: Any) -> tuple[Any, str]:
    with pytest.raises(InferenceServerException) as refusal:
        infer(world, route, **options)
    return refusal.value.status(), refusal.value.message() or ""


def predictions(world: World) -> list[Any]:
    return [
        e.event
        for e in world.entries()
        if e.event.unit is Unit.PREDICTION and e.event.status is UsageStatus.SUCCEEDED
    ]


def test_a_routed_grpc_call_picks_names_bills_and_falls_back(world: World) -> None:
    # The cheapest of all is private to acme: never routed to for beta.
    hidden = {"visibility": "private", **EMBED_IO}
    publish(world.admin, world.services, "acme/hidden", EMBED_FORMAT, "embeddings", **hidden)
    world.price("acme/hidden", "prediction", 1)
    before = world.balance()[0]
    answer, served = infer(world, {"prefer": "cheapest"})
    assert served == "acme/quick:1"
    assert [o["name"] for o in answer["outputs"]] == ["embedding", "tokens"]
    # The metadata form; its preferences win over none in the parameters.
    assert infer(world, None, metadata='{"prefer": "cheapest", "max_price": 100}')[1] == (
        "acme/quick:1"
    )
    # The cheaper one down: the next answers; only the answers are billed, each at its price.
    FlakyEmbedModel.failing = True
    calls = FlakyEmbedModel.calls
    assert infer(world, {"prefer": "cheapest"})[1] == "acme/embedder:1"
    assert FlakyEmbedModel.calls == calls + 1  # tried first, failed
    assert eventually(lambda: len(predictions(world)) == 3)
    assert sorted(e.model for e in predictions(world)) == ["acme/embedder"] + ["acme/quick"] * 2
    assert world.balance() == (before - 2 * 50 - 500, 0)


def test_a_routed_grpc_call_refused_with_its_code(world: World) -> None:
    # Nothing is cheap enough: the error names the candidates left out and why.
    status, message = refused(world, {"max_price": 1})
    assert status == str(grpc.StatusCode.FAILED_PRECONDITION)
    assert message.startswith("route_no_candidate") and "acme/embedder:1" in message
    # No verified score meets a minimum.
    assert "no verified leaderboard score" in refused(world, {"min_score": 0.5})[1]
    # A task no model the caller may call serves.
    status, message = refused(world, None, model="route:translation")
    assert status == str(grpc.StatusCode.NOT_FOUND) and message.startswith("route_no_candidate")
    for bad in ({"route": {"prefer": "loudest"}}, {"metadata": "{not json"}, {"version": "1"}):
        status, message = refused(world, bad.pop("route", None), **bad)
        assert status == str(grpc.StatusCode.INVALID_ARGUMENT), message
        assert message.startswith("invalid_route"), message
    assert predictions(world) == []
