"""Routing by need on ``/v2`` through ``tritonclient``: ``/v2/models/route:embeddings/infer``
with ``parameters.route`` (or the ``Modelport-Route`` header) picks among the embedding
models the caller may call; the answer's ``model_name``/``model_version`` and the
``Modelport-Routed-Model`` header name the one that served it, billed at its price once;
a failing first choice falls back to the next."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import tritonclient.http as triton
from tritonclient.utils import InferenceServerException

from modelport.inference.degrade import Degradation
from modelport.metering.types import Unit, UsageStatus
from tests.api_openai.conftest import EMBED_FORMAT, EMBED_IO, World, build_world, publish
from tests.api_openai.routing import FlakyEmbedModel, Waits, embed_world
from tests.databases import migrated_sqlite
from tests.polling import eventually

HIDDEN: dict[str, Any] = {"visibility": "private", **EMBED_IO}


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    built = build_world(tmp_path / "home", migrated_sqlite(tmp_path / "home.db"), monkeypatch)
    try:
        embed_world(built, monkeypatch)
        yield built
    finally:
        built.close()


def infer(world: World, route: dict[str, Any] | None) -> tuple[Any, str]:
    client = triton.InferenceServerClient(url=world.url.removeprefix("http://"))
    try:
        text = triton.InferInput("text", [1], "BYTES")
        text.set_data_from_numpy(np.array([b"two words"], dtype=np.object_))
        result = client.infer(
            "route:embeddings",
            [text],
            parameters=None if route is None else {"route": route},
            headers={"Authorization": f"Bearer {world.key}"},
        )
        answer = result.get_response()
        assert result.as_numpy("tokens").tolist() == [4]
        return answer, answer["model_name"] + ":" + answer["model_version"]
    finally:
        client.close()


def test_a_routed_v2_call_picks_names_bills_and_falls_back(world: World) -> None:
    # The cheapest of all is private to acme: never routed to for beta.
    publish(world.admin, world.services, "acme/hidden", EMBED_FORMAT, "embeddings", **HIDDEN)
    world.price("acme/hidden", "prediction", 1)
    before = world.balance()[0]
    answer, served = infer(world, {"prefer": "cheapest"})
    assert [o["name"] for o in answer["outputs"]] == ["embedding", "tokens"]
    assert served == "acme/quick:1"
    assert infer(world, None)[1] == "acme/quick:1"  # no scores: the cheaper first
    # The header form, and its routed-model header, on a plain HTTP client.
    with httpx.Client(base_url=world.url) as client:
        body = {"inputs": [{"name": "text", "datatype": "BYTES", "shape": [1], "data": ["a b"]}]}
        response = client.post(
            "/v2/models/route:embeddings/infer",
            json=body,
            headers={
                "Authorization": f"Bearer {world.key}",
                "Modelport-Route": '{"prefer": "cheapest", "max_price": 100}',
            },
        )
        assert response.status_code == 200, response.text
        assert response.headers["modelport-routed-model"] == "acme/quick:1"
        too_dear = client.post(
            "/v2/models/route:embeddings/infer",
            json=body,
            headers={"Authorization": f"Bearer {world.key}", "Modelport-Route": '{"max_price": 1}'},
        )
        assert too_dear.status_code == 422
        assert "route_no_candidate" in too_dear.text and "acme/embedder:1" in too_dear.text
    # The cheaper one down: the next answers, and only the answers are billed.
    FlakyEmbedModel.failing = True
    calls = FlakyEmbedModel.calls
    assert infer(world, {"prefer": "cheapest"})[1] == "acme/embedder:1"
    assert FlakyEmbedModel.calls == calls + 1  # tried first, failed

    def predictions() -> list[Any]:
        return [
            e.event
            for e in world.entries()
            if e.event.unit is Unit.PREDICTION and e.event.status is UsageStatus.SUCCEEDED
        ]

    assert eventually(lambda: len(predictions()) == 4)
    assert sorted(e.model for e in predictions()) == ["acme/embedder"] + ["acme/quick"] * 3
    assert world.balance() == (before - 3 * 50 - 500, 0)
    # No verified score: nothing meets a minimum, and the error says why.
    with pytest.raises(InferenceServerException) as unscored:
        infer(world, {"min_score": 0.5})
    assert "no verified leaderboard score" in str(unscored.value)


def test_under_load_batch_tensor_calls_go_to_the_fallback_or_are_shed(world: World) -> None:
    waits = Waits()
    inference = world.services.inference
    inference.degradation = Degradation(waits, 0.5, {"acme/embedder": "acme/quick"})
    waits.seconds.update({"acme/embedder": 3.0, "acme/quick": 2.2})
    body = {"inputs": [{"name": "text", "datatype": "BYTES", "shape": [1], "data": ["a b"]}]}
    auth = {"Authorization": f"Bearer {world.key}"}
    with httpx.Client(base_url=world.url, headers=auth) as client:

        def call(model: str, priority: str | None) -> httpx.Response:
            parameters = {} if priority is None else {"priority": priority}
            return client.post(f"/v2/models/{model}/infer", json={**body, "parameters": parameters})

        # Interactive: the loaded model serves it.
        answer = call("acme/embedder", None)
        assert answer.status_code == 200 and answer.json()["model_name"] == "acme/embedder"
        assert "modelport-routed-model" not in answer.headers
        # Batch: shed, for its fallback is loaded too.
        shed = call("acme/embedder", "batch")
        assert shed.status_code == 503 and shed.headers["retry-after"] == "3"
        assert "degraded" in shed.text
        # The fallback drains: batch goes there, named in the answer and its header.
        waits.seconds["acme/quick"] = 0.1
        calls = FlakyEmbedModel.calls
        moved = call("acme/embedder", "offline")
        assert moved.status_code == 200, moved.text
        assert moved.json()["model_name"] == "acme/quick"
        assert moved.headers["modelport-routed-model"] == "acme/quick:1"
        assert FlakyEmbedModel.calls == calls + 1


def test_an_endpoint_call_under_load_goes_to_its_policys_fallback(world: World) -> None:
    """``POST /api/endpoints/{name}:predict``: a batch call of an endpoint whose chosen
    version is loaded past the endpoint's own threshold is answered by the endpoint's
    fallback, named in the answer (a ``version`` fallback for the reason ``degraded``) and
    billed at its price; interactive calls keep the endpoint's version."""
    world.deploy("vectors", "acme/embedder:1")
    waits = Waits()
    inference = world.services.inference
    assert inference.degradation is not None
    inference.degradation = replace(inference.degradation, waits=waits)
    waits.seconds["acme/embedder"] = 3.0
    policy = {"queue_wait_seconds": 1.0, "fallback": "acme/quick"}
    assert world.admin.put("/api/endpoints/vectors/degradation", json=policy).status_code == 200
    body = {"inputs": [{"name": "text", "datatype": "BYTES", "shape": [1], "data": ["a b"]}]}
    auth = {"Authorization": f"Bearer {world.key}"}
    with httpx.Client(base_url=world.url, headers=auth) as client:

        def predict(priority: str | None) -> dict[str, Any]:
            parameters = {} if priority is None else {"priority": priority}
            answer = client.post(
                "/api/endpoints/vectors:predict", json={**body, "parameters": parameters}
            )
            assert answer.status_code == 200, answer.text
            found: dict[str, Any] = answer.json()
            return found

        calls = FlakyEmbedModel.calls
        assert predict(None)["model"] == "acme/embedder"
        moved = predict("batch")
        assert (moved["model"], moved["model_version"]) == ("acme/quick", "1")
        assert moved["endpoint"] == "vectors"
        assert moved["fallback"]["kind"] == "version"
        assert moved["fallback"]["reason"] == "degraded"
        assert moved["fallback"]["chosen"] == "acme/embedder:1"
        # Logged as the endpoint's prediction, with who answered.

        def logged() -> dict[str, Any] | None:
            found = client.get(f"/api/predictions/{moved['prediction_id']}")
            return found.json() if found.status_code == 200 else None

        assert eventually(lambda: logged() is not None)
        record = logged()
        assert record is not None and record["endpoint"] == "vectors", record
        assert "acme/quick" in str(record), record
        assert FlakyEmbedModel.calls == calls + 1
        waits.seconds["acme/embedder"] = 0.5  # under the endpoint's threshold
        assert predict("batch")["model"] == "acme/embedder"

    def predictions() -> list[Any]:
        return [
            e.event
            for e in world.entries()
            if e.event.unit is Unit.PREDICTION and e.event.status is UsageStatus.SUCCEEDED
        ]

    assert eventually(lambda: len(predictions()) == 3)
    assert sorted(e.model for e in predictions()) == ["acme/embedder"] * 2 + ["acme/quick"]
