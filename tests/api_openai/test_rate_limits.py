"""/v1 calls are admitted by the same step as /v2's: chats and completions, whole and
streamed, and embeddings, of a model or an endpoint, carry the ``RateLimit-*`` headers
of the allowance they were charged to, counting down; once it is spent, the 429 carries
them with ``Retry-After``, as on /v2 (``tests/limits/test_infer_gate.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from modelport.clock import ManualClock
from modelport.tenancy.limits import ScopeType
from tests.api_openai.conftest import World, build_world
from tests.databases import migrated_sqlite

HELLO = [{"role": "user", "content": "hello"}]


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    """The platform on a clock that stands still: no allowance refills between calls,
    however slowly a loaded machine makes them."""
    built = build_world(
        tmp_path / "home", migrated_sqlite(tmp_path / "home.db"), monkeypatch, clock=ManualClock()
    )
    yield built
    built.close()


def _limit(world: World, *, rpm: int | None = None, tpm: int | None = None) -> None:
    world.services.limits.set_limits(
        ScopeType.KEY, world.key_id, tenant=None, rpm=rpm, concurrency=None, tpm=tpm, actor="t"
    )


def _counted(headers: httpx.Headers, limit: int, remaining: int) -> None:
    assert headers["RateLimit-Limit"] == str(limit)
    assert headers["RateLimit-Remaining"] == str(remaining)
    assert 0 < int(headers["RateLimit-Reset"]) <= 60


def _chat_text(raw: Any) -> str:
    """A streamed chat's text (``with_raw_response``), read to its end."""
    with raw.parse() as stream:
        return "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)


def _completion_text(raw: Any) -> str:
    """A streamed completion's text (``with_raw_response``), read to its end."""
    with raw.parse() as stream:
        return "".join(chunk.choices[0].text for chunk in stream if chunk.choices)


def test_chats_and_completions_whole_and_streamed_count_down_then_429(world: World) -> None:
    _limit(world, rpm=5)
    with world.client() as client:
        chats = client.chat.completions.with_raw_response
        completions = client.completions.with_raw_response
        whole = chats.create(model="acme/writer", messages=HELLO)
        _counted(whole.headers, 5, 4)
        assert whole.parse().choices[0].message.content == "hello"
        streamed = chats.create(model="acme/writer", messages=HELLO, stream=True)
        _counted(streamed.headers, 5, 3)
        assert _chat_text(streamed) == "hello"
        text = completions.create(model="acme/writer", prompt="a b", max_tokens=2)
        _counted(text.headers, 5, 2)
        assert text.parse().choices[0].text == "a b"
        text_streamed = completions.create(
            model="acme/writer", prompt="a b", max_tokens=2, stream=True
        )
        _counted(text_streamed.headers, 5, 1)
        assert _completion_text(text_streamed) == "a b"
        embedded = client.embeddings.with_raw_response.create(model="acme/embedder", input="x")
        _counted(embedded.headers, 5, 0)
        for stream in (False, True):
            with pytest.raises(openai.RateLimitError) as caught:
                chats.create(model="acme/writer", messages=HELLO, stream=stream)
            refused = caught.value.response
            assert caught.value.code == "rate_limited"
            _counted(refused.headers, 5, 0)
            assert 1 <= int(refused.headers["Retry-After"]) <= 12  # a request every 12 s
    assert len(world.engine.records) == 4  # the refused calls never ran


def test_a_stream_over_httpx_carries_the_headers_on_its_event_stream(world: World) -> None:
    _limit(world, rpm=2)
    body = {"model": "acme/writer", "messages": HELLO, "stream": True}
    auth = {"Authorization": f"Bearer {world.key}"}
    with (
        httpx.Client(base_url=world.url, headers=auth) as client,
        client.stream("POST", "/v1/chat/completions", json=body) as answer,
    ):
        assert answer.status_code == 200
        assert answer.headers["content-type"].startswith("text/event-stream")
        _counted(answer.headers, 2, 1)
        assert answer.read().endswith(b"data: [DONE]\n\n")


def test_an_endpoints_calls_carry_the_headers(world: World) -> None:
    world.deploy("chat", "acme/writer:1")
    _limit(world, rpm=3)
    with world.client() as client:
        chats = client.chat.completions.with_raw_response
        _counted(chats.create(model="chat", messages=HELLO).headers, 3, 2)
        streamed = chats.create(model="chat", messages=HELLO, stream=True)
        _counted(streamed.headers, 3, 1)
        assert _chat_text(streamed) == "hello"


def test_unlimited_calls_carry_no_headers(world: World) -> None:
    with world.client() as client:
        answer = client.chat.completions.with_raw_response.create(
            model="acme/writer", messages=HELLO, stream=True
        )
        assert "RateLimit-Limit" not in answer.headers
        assert _chat_text(answer) == "hello"


def test_a_stream_refused_by_tokens_per_minute_carries_the_token_allowance(
    world: World,
) -> None:
    """Admitted, a stream's headers are its requests allowance's (none here); refused by
    its token bound (the prompt's bytes plus ``max_tokens``), the 429's are the token
    allowance's."""
    _limit(world, tpm=30)
    with world.client() as client:
        completions = client.completions.with_raw_response
        first = completions.create(model="acme/writer", prompt="hello", max_tokens=16)  # 21
        assert "RateLimit-Limit" not in first.headers
        with pytest.raises(openai.RateLimitError) as caught:
            completions.create(model="acme/writer", prompt="hello", max_tokens=16, stream=True)
    refused = caught.value.response
    assert caught.value.code == "rate_limited"
    _counted(refused.headers, 30, 0)
    assert int(refused.headers["Retry-After"]) >= 1
