"""/v1/embeddings with the official SDK: the model's vectors as floats and as base64,
``usage`` from the tokens the model counted, billed per input token (through /v1 and
/v2 alike), ``dimensions`` only when it is the model's own, and refusals."""

from __future__ import annotations

import asyncio
import base64

import httpx
import numpy as np
import openai
import pytest

from modelport.metering.types import Unit, UsageStatus
from tests.api_openai.conftest import DIMENSIONS, World, embed

TEXTS = ["the quick brown fox", "jumps", "over the lazy dog"]
TOKENS = sum(embed(t.encode())[1] for t in TEXTS)


def expected(text: str) -> list[float]:
    return embed(text.encode())[0]


def test_float_embeddings_with_usage(world: World) -> None:
    answer = world.client().embeddings.create(
        model="acme/embedder", input=TEXTS, encoding_format="float"
    )
    assert answer.object == "list" and answer.model == "acme/embedder"
    assert [d.index for d in answer.data] == [0, 1, 2]
    assert [d.embedding for d in answer.data] == [expected(t) for t in TEXTS]
    assert answer.usage.prompt_tokens == answer.usage.total_tokens == TOKENS


def test_base64_embeddings_are_the_same_floats(world: World) -> None:
    # The SDK asks for base64 by default and decodes it itself.
    answer = world.client().embeddings.create(model="acme/embedder", input="jumps")
    assert answer.data[0].embedding == expected("jumps")
    raw = httpx.post(
        world.url + "/v1/embeddings",
        json={"model": "acme/embedder", "input": TEXTS, "encoding_format": "base64"},
        headers={"Authorization": f"Bearer {world.key}"},
    )
    assert raw.status_code == 200, raw.text
    for item, text in zip(raw.json()["data"], TEXTS, strict=True):
        vector = np.frombuffer(base64.b64decode(item["embedding"]), dtype="<f4")
        assert vector.tolist() == expected(text)


def test_the_async_client_embeds(world: World) -> None:
    async def run() -> list[list[float]]:
        async with world.async_client() as client:
            answer = await client.embeddings.create(model="acme/embedder", input=TEXTS[:2])
            return [d.embedding for d in answer.data]

    assert asyncio.run(run()) == [expected(t) for t in TEXTS[:2]]


def test_dimensions_only_when_they_are_the_models_own(world: World) -> None:
    client = world.client()
    same = client.embeddings.create(model="acme/embedder", input="x", dimensions=DIMENSIONS)
    assert len(same.data[0].embedding) == DIMENSIONS
    with pytest.raises(openai.BadRequestError) as caught:
        client.embeddings.create(model="acme/embedder", input="x", dimensions=2)
    assert (caught.value.code, caught.value.param) == ("unsupported_dimensions", "dimensions")


@pytest.mark.parametrize(
    ("model", "payload", "code"),
    [
        ("acme/writer", "hello", "not_an_embedding_model"),
        ("acme/embedder", "", "invalid_parameter"),
        ("acme/embedder", [], "invalid_parameter"),
        ("acme/embedder", [[1, 2]], "unsupported_parameter"),
    ],
)
def test_refusals(shared_world: World, model: str, payload: object, code: str) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        shared_world.client().embeddings.create(model=model, input=payload)  # type: ignore[arg-type]
    assert caught.value.code == code


def test_an_unknown_model_or_endpoint_is_404(shared_world: World) -> None:
    for model in ("acme/nothing", "no-such-endpoint"):
        with pytest.raises(openai.NotFoundError) as caught:
            shared_world.client().embeddings.create(model=model, input="x")
        assert caught.value.code == "model_not_found"


def test_embeddings_are_billed_per_input_token(world: World) -> None:
    world.price("acme/embedder", "input_token", 10)
    world.credit(100_000)
    answer = world.client().embeddings.create(model="acme/embedder", input=TEXTS)
    assert answer.usage.prompt_tokens == TOKENS
    [event] = [e.event for e in world.entries() if e.event.unit is Unit.INPUT_TOKEN]
    assert (event.quantity, event.amount_micros) == (TOKENS, 10 * TOKENS)
    assert event.status is UsageStatus.SUCCEEDED and event.model == "acme/embedder"
    assert world.balance() == (100_000 - 10 * TOKENS, 0)


def test_an_embedding_call_whose_texts_could_exceed_the_budget_is_402(world: World) -> None:
    world.price("acme/embedder", "input_token", 10)
    # Held before it runs: one token per byte and 8 per text, 10 micros each (190 here).
    world.credit(150)
    with pytest.raises(openai.APIStatusError) as caught:
        world.client().embeddings.create(model="acme/embedder", input=["a few words"])
    assert caught.value.status_code == 402 and caught.value.code == "budget_exceeded"
    world.credit(100)
    assert world.client().embeddings.create(model="acme/embedder", input=["a few words"])


def test_a_v2_call_of_an_embedding_model_is_billed_by_the_token_too(world: World) -> None:
    """Asking /v2 for the vectors alone does not skip the bill: the service still reads
    the tokens, and answers only what was asked."""
    world.price("acme/embedder", "input_token", 10)
    world.credit(100_000)
    body = {
        "inputs": [{"name": "text", "datatype": "BYTES", "shape": [2], "data": TEXTS[:2]}],
        "outputs": [{"name": "embedding"}],
    }
    response = httpx.post(
        world.url + "/v2/models/acme/embedder/infer",
        json=body,
        headers={"Authorization": f"Bearer {world.key}"},
    )
    assert response.status_code == 200, response.text
    assert [o["name"] for o in response.json()["outputs"]] == ["embedding"]
    [event] = [e.event for e in world.entries() if e.event.unit is Unit.INPUT_TOKEN]
    assert event.quantity == sum(embed(t.encode())[1] for t in TEXTS[:2])


def test_an_endpoint_serving_an_embedding_model(world: World) -> None:
    world.deploy("vectors", "acme/embedder:1")
    answer = world.client().embeddings.create(model="vectors", input=TEXTS, encoding_format="float")
    assert [d.embedding for d in answer.data] == [expected(t) for t in TEXTS]
    assert answer.usage.prompt_tokens == TOKENS
    listed = {m.id: m for m in world.client().models.list()}
    assert listed["vectors"].owned_by == "beta"
