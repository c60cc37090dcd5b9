"""/v1/models with the official SDK: what the key may call (the models of other tenants
it may see, once approved; its own tenant's endpoints), owned by their tenant; and one
model or endpoint by the names the other routes take."""

from __future__ import annotations

import openai
import pytest

from tests.api_openai.conftest import TEXT_IO, World, publish
from tests.conftest import ADMIN_KEY

PUBLISHED = {"acme/writer", "acme/counter", "acme/embedder"}


def test_the_list_holds_what_the_key_may_call(world: World) -> None:
    services, admin = world.services, world.admin
    services.tenancy.create_tenant("gamma", actor="admin")
    publish(admin, services, "gamma/secret", "toy-chat", "chat", visibility="private", **TEXT_IO)
    publish(admin, services, "acme/draft", "toy-chat", "chat", approved=False, **TEXT_IO)
    listed = {m.id: m for m in world.client().models.list()}
    assert set(listed) == PUBLISHED  # not gamma's private model, not acme's draft
    writer = listed["acme/writer"]
    assert (writer.object, writer.owned_by) == ("model", "acme")
    assert writer.created > 0
    everything = {m.id for m in world.client(ADMIN_KEY).models.list()}
    assert everything == PUBLISHED | {"gamma/secret", "acme/draft"}
    for hidden in ("acme/draft", "gamma/secret"):
        with pytest.raises(openai.NotFoundError):
            world.client().models.retrieve(hidden)
        assert world.client(ADMIN_KEY).models.retrieve(hidden).id == hidden


def test_one_model_by_its_names(shared_world: World) -> None:
    client = shared_world.client()
    for name in ("acme/writer", "acme/writer:1"):
        model = client.models.retrieve(name)
        assert (model.id, model.owned_by) == (name, "acme")
    for name in ("acme/writer:7", "acme/nothing", "no-endpoint", "Bad Name"):
        with pytest.raises(openai.NotFoundError) as caught:
            client.models.retrieve(name)
        assert caught.value.code == "model_not_found"
