"""Remote backends pass the metered call's id on (``Modelport-Call-Id``), so their
publisher can report the call's usage against it; a call with nothing held sends none."""

from __future__ import annotations

import asyncio

import httpx
import numpy as np
import pytest

from modelport.errors import Unavailable
from modelport.serving.backends.remote_openai import RemoteOpenAIBackend
from modelport.serving.backends.remote_v2 import RemoteV2Backend
from modelport.serving.types import CALL_ID_HEADER
from tests.serving.backend_support import request_for, version_ref
from tests.serving.backends.test_remote_openai import llm_version, request


def refusing(seen: list[str | None]) -> httpx.MockTransport:
    """A server that notes each call's call id header and answers 503."""

    def handle(incoming: httpx.Request) -> httpx.Response:
        seen.append(incoming.headers.get(CALL_ID_HEADER))
        return httpx.Response(503, json={"error": "busy"})

    return httpx.MockTransport(handle)


@pytest.mark.parametrize("call_id", ["c0ffee" * 5 + "00", ""])
def test_remote_v2_sends_the_call_id(call_id: str) -> None:
    seen: list[str | None] = []
    remote = RemoteV2Backend("gpu", "http://remote.test", transport=refusing(seen))
    with pytest.raises(Unavailable):
        asyncio.run(remote.infer(request_for(version_ref(), call_id=call_id)))
    assert seen == [call_id or None]


@pytest.mark.parametrize("call_id", ["c0ffee" * 5 + "00", ""])
def test_remote_openai_sends_the_call_id(call_id: str) -> None:
    seen: list[str | None] = []
    remote = RemoteOpenAIBackend(
        "llm", "http://remote.test", formats=frozenset({"gguf"}), transport=refusing(seen)
    )
    prompts = np.array([b"hello"], dtype=object)
    with pytest.raises(Unavailable):
        asyncio.run(remote.infer(request(llm_version("completions"), prompts, call_id=call_id)))
    assert seen == [call_id or None]
