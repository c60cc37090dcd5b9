"""``ModelStreamInfer`` with ``tritonclient.grpc``'s stream: a generative model's text
comes chunk by chunk, then a final response with the call's tokens; a refusal is an
in-band error and the stream goes on; an endpoint streams too; the call is metered by the
token, like ``/v1``'s. The platform is ``/v1``'s (a toy generative engine that echoes its
prompt word by word, published by acme, called with beta's consumer key)."""

from __future__ import annotations

import queue
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as triton
from tritonclient.utils import InferenceServerException

from modelport.metering.types import Unit
from tests.api_grpc.conftest import key
from tests.api_openai.conftest import World, build_world
from tests.databases import migrated_sqlite
from tests.isolation import free_port

Answer = tuple[Any, InferenceServerException | None]


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    built = build_world(
        tmp_path / "home",
        migrated_sqlite(tmp_path / "home.db"),
        monkeypatch,
        grpc_port=free_port(),
    )
    yield built
    built.close()


class Stream:
    """tritonclient's bidirectional stream, its answers gathered in order."""

    def __init__(self, port: int | None, token: str) -> None:
        assert port is not None
        self.client = triton.InferenceServerClient(f"127.0.0.1:{port}")
        self.answers: queue.Queue[Answer] = queue.Queue()
        self.client.start_stream(
            callback=lambda result, error: self.answers.put((result, error)),
            headers=key(token),
        )

    @classmethod
    def of(cls, world: World, token: str) -> Stream:
        assert world.services.grpc is not None
        return cls(world.services.grpc.port, token)

    def send(self, model: str, prompt: str, **parameters: Any) -> None:
        text = triton.InferInput("text_input", [1], "BYTES")
        text.set_data_from_numpy(np.array([prompt.encode()], dtype=object))
        self.client.async_stream_infer(
            model, [text], request_id=f"req-{prompt[:8]}", parameters=parameters
        )

    def next(self) -> Answer:
        return self.answers.get(timeout=60)

    def call(self) -> tuple[list[str], dict[str, Any]]:
        """One request's text chunks and its final response's parameters."""
        chunks: list[str] = []
        while True:
            result, error = self.next()
            assert error is None, error
            response = result.get_response()
            parameters = {k: _value(v) for k, v in response.parameters.items()}
            if parameters["triton_final_response"]:
                assert result.as_numpy("text_output") is None
                return chunks, parameters
            (text,) = result.as_numpy("text_output").tolist()
            chunks.append(text.decode())

    def close(self) -> None:
        self.client.stop_stream()
        self.client.close()


def _value(parameter: Any) -> Any:
    return getattr(parameter, parameter.WhichOneof("parameter_choice"))


def test_a_generative_model_streams_its_text_then_the_calls_tokens(world: World) -> None:
    world.price("acme/writer", "output_token", 5)
    world.credit(1_000_000)
    stream = Stream.of(world, world.key)
    try:
        stream.send("acme/writer", "the quick brown fox", max_tokens=8)
        chunks, final = stream.call()
        assert chunks == ["the", " quick", " brown", " fox"]
        assert final["finish_reason"] == "stop"
        assert final["output_tokens"] == 4 and final["input_tokens"] == 4
        prediction = final["prediction_id"]

        # A refusal comes in-band, with its code; the stream goes on.
        stream.send("acme/nowhere", "hello")
        result, error = stream.next()
        assert result is None and error is not None
        assert error.message().startswith("model_not_found: ")
        stream.send("acme/writer", "a b c", max_tokens=2)
        chunks, final = stream.call()
        assert chunks == ["a", " b"] and final["finish_reason"] == "length"
        stream.send("acme/writer", "a b c", max_tokens=0)
        _, error = stream.next()
        assert error is not None and error.message().startswith("invalid_max_tokens: ")
    finally:
        stream.close()

    output = [
        e.event
        for e in world.entries()
        if e.event.unit == Unit.OUTPUT_TOKEN and e.event.prediction_id == prediction
    ]
    assert [(e.quantity, e.amount_micros, e.tenant) for e in output] == [(4, 20, "beta")]


def test_an_endpoint_streams_by_its_name(world: World) -> None:
    world.deploy("chat", "acme/writer:1")
    stream = Stream.of(world, world.key)
    try:
        stream.send("chat", "hello there")
        chunks, final = stream.call()
    finally:
        stream.close()
    assert chunks == ["hello", " there"] and final["output_tokens"] == 2
    endpoint_events = {e.event.endpoint for e in world.entries()}
    assert endpoint_events == {"chat"}


def test_a_stream_without_a_key_is_refused_whole(world: World) -> None:
    stream = Stream.of(world, "mp_not_a_key")
    try:
        # The stream ends as it opens, before any request is sent on it.
        result, error = stream.next()
    finally:
        stream.close()
    assert result is None and error is not None
    assert error.status() == "StatusCode.UNAUTHENTICATED"
    assert "invalid_credentials" in (error.message() or "")
