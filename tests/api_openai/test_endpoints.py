"""Chat through an endpoint by its name (``model="chat"``), whole and streamed: the
endpoint's route chooses the version, as for every endpoint call. The generative
version is deployed as a tensor one is: the deployment loads its engine (placement)."""

from __future__ import annotations

import openai
import pytest

from tests.api_openai.conftest import World


def test_a_chat_through_an_endpoint_whole_and_streamed(world: World) -> None:
    world.deploy("chat", "acme/writer:1")  # through the controller: its engine is loaded
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


def test_a_deployed_generative_version_reports_its_engine_loaded(world: World) -> None:
    world.deploy("chat", "acme/writer:1")
    shown = world.admin.get("/api/endpoints/chat").json()
    assert shown["name"] == "chat"
    deployments = world.admin.get("/api/endpoints/chat/deployments").json()
    newest = deployments["items"][0] if isinstance(deployments, dict) else deployments[0]
    (version,) = newest["versions"]
    assert (version["model"], version["version"], version["state"]) == ("acme/writer", "1", "ready")
    assert "load" in version["phases"]
