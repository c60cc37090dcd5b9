"""Chat through an endpoint by its name (``model="chat"``), whole and streamed.

Enabled once ``InferenceService.stream`` takes an ``EndpointTarget`` (and a generative
version can be deployed); until then the surface already sends endpoint names there,
and these tests are skipped, saying why."""

from __future__ import annotations

import inspect

import openai
import pytest

from modelport.inference.service import InferenceService
from tests.api_openai.conftest import World


def _streams_endpoints() -> bool:
    annotation = inspect.signature(InferenceService.stream).parameters["target"].annotation
    return "EndpointTarget" in str(annotation) or str(annotation) == "Target"


pytestmark = pytest.mark.skipif(
    not _streams_endpoints(),
    reason="InferenceService.stream does not take an EndpointTarget yet",
)


def test_a_chat_through_an_endpoint_whole_and_streamed(world: World) -> None:
    world.deploy("chat", "acme/writer:1")
    client = world.client()
    hello = [{"role": "user", "content": "hello endpoint"}]
    answer = client.chat.completions.create(model="chat", messages=hello)
    assert answer.choices[0].message.content == "hello endpoint"
    assert answer.usage is not None and answer.usage.completion_tokens == 2
    streamed = "".join(
        c.choices[0].delta.content or ""
        for c in client.chat.completions.create(model="chat", messages=hello, stream=True)
        if c.choices
    )
    assert streamed == "hello endpoint"


def test_an_unknown_endpoint_is_404_model_not_found(world: World) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        world.client().chat.completions.create(
            model="no-such-endpoint", messages=[{"role": "user", "content": "x"}]
        )
    assert caught.value.code == "model_not_found"
