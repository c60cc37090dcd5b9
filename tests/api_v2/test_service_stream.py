"""``InferenceService.stream``: a generative call goes through the same resolution and
access checks as every other call before any backend streams (the stream itself, its
metering and its cancellation: ``test_streaming.py``)."""

from __future__ import annotations

import asyncio
import time

import pytest

from modelport.errors import ModelportError
from modelport.inference.streaming import GenerateRequest
from modelport.inference.types import Caller, ModelTarget
from modelport.tenancy.types import Principal
from tests.conftest import ensure_tenant

ADMIN = Principal(id="admin", roles=frozenset({"admin"}))
STRANGER = Principal(id="beta/dev", roles=frozenset({"consumer"}), tenant="beta")


def _stream(services, principal: Principal, ref: str) -> ModelportError:  # type: ignore[no-untyped-def]
    owner, name = ref.split("/")
    request = GenerateRequest(prompt="hello", max_tokens=4)

    async def run() -> None:
        await services.inference.stream(
            Caller(principal), ModelTarget(owner, name), request, time.monotonic() + 5
        )

    with pytest.raises(ModelportError) as caught:
        asyncio.run(run())
    return caught.value


def test_a_model_another_tenant_may_not_see_is_not_found(v2) -> None:  # type: ignore[no-untyped-def]
    _, services, publisher = v2
    publisher.adder("acme/adder")
    refused = _stream(services, STRANGER, "acme/adder")
    assert refused.code == "model_not_found"


def test_another_tenants_unapproved_version_is_refused(v2) -> None:  # type: ignore[no-untyped-def]
    client, services, publisher = v2
    ensure_tenant(client, "acme")
    created = client.post(
        "/api/models",
        json={"owner": "acme", "name": "open", "license": "MIT", "visibility": "public"},
    )
    assert created.status_code == 201, created.text
    publisher.models.add("acme/open")
    publisher.adder("acme/open")
    refused = _stream(services, STRANGER, "acme/open")
    assert refused.code == "version_not_approved"


def test_a_tensor_model_reaches_its_backend_which_cannot_stream(v2) -> None:  # type: ignore[no-untyped-def]
    _, services, publisher = v2
    publisher.adder("acme/adder")
    refused = _stream(services, ADMIN, "acme/adder")
    assert refused.code == "streaming_unsupported"
