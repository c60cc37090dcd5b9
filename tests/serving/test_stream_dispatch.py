"""``Dispatcher.open_stream`` with scripted backends: the first replica that yields a
first chunk serves; failures before it are classified as for tensor calls (counted,
not counted, raised at once); open breakers are skipped; the fallback chain's version
steps stream, its cached and static steps cannot, its ``unavailable`` step stops; after
the first chunk the breaker hears the stream's outcome when it ends."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import numpy as np
import pytest

from modelport.errors import InvalidInput, ModelportError, Overloaded, Unavailable
from modelport.serving.answer_cache import AnswerCache
from modelport.serving.breaker import BreakerConfig, BreakerState
from modelport.serving.dispatch import Dispatcher
from modelport.serving.fallback import (
    CacheOption,
    FallbackOption,
    StaticOption,
    UnavailableOption,
    VersionOption,
)
from modelport.serving.health import HealthBoard
from modelport.serving.stream_dispatch import OpenedStream
from modelport.serving.types import (
    Capabilities,
    FallbackKind,
    StreamChunk,
    StreamRequest,
    VersionRef,
)
from tests.serving.backend_support import version_ref

IO: dict[str, Any] = {
    "inputs": [{"name": "prompt", "datatype": "BYTES", "shape": [1]}],
    "outputs": [{"name": "text", "datatype": "BYTES", "shape": [1]}],
}
PRIMARY = version_ref("acme/writer", "1", fmt="toy", **IO)
OTHER = version_ref("acme/writer", "2", fmt="toy", **IO)


class Scripted:
    """A backend whose stream fails before its first chunk with ``fail``, or yields
    ``words`` then fails with ``then`` (if given)."""

    def __init__(
        self,
        name: str,
        *,
        fail: Exception | None = None,
        words: tuple[str, ...] = ("a", "b"),
        then: Exception | None = None,
        context_length: int | None = None,
    ) -> None:
        self.name = name
        self.fail, self.words, self.then = fail, words, then
        self.calls = 0
        self.closed = False
        self._caps = Capabilities(formats=frozenset({"toy"}), context_length=context_length)

    def capabilities(self) -> Capabilities:
        return self._caps

    async def stream(self, request: StreamRequest) -> AsyncIterator[StreamChunk]:
        self.calls += 1
        try:
            if self.fail is not None:
                raise self.fail
            yield StreamChunk(0, "", 0, self.name, input_tokens=2)
            for i, word in enumerate(self.words):
                last = i == len(self.words) - 1 and self.then is None
                yield StreamChunk(i + 1, word, 1, self.name, finish_reason="stop" if last else None)
            if self.then is not None:
                raise self.then
        finally:
            self.closed = True


def request(version: VersionRef = PRIMARY, prompt: str = "hello") -> StreamRequest:
    return StreamRequest(version, prompt, 8, time.monotonic() + 5)


def board() -> HealthBoard:
    return HealthBoard(BreakerConfig(min_calls=1, failure_rate=1.0, open_seconds=60))


def open_and_read(
    dispatcher: Dispatcher,
    replicas: list[Scripted],
    fallback: list[FallbackOption] | None = None,
    req: StreamRequest | None = None,
) -> tuple[OpenedStream, list[StreamChunk]]:
    async def scenario() -> tuple[OpenedStream, list[StreamChunk]]:
        opened = await dispatcher.open_stream(
            req or request(), replicas, fallback=fallback or (), endpoint="chat"
        )
        rest = [chunk async for chunk in opened.rest]
        return opened, [opened.first, *rest]

    return asyncio.run(scenario())


def failures(health: HealthBoard, name: str) -> int:
    return health.breaker(name).snapshot().failures


def test_the_first_replica_that_starts_serves_and_its_breaker_hears_success() -> None:
    health = board()
    dead = Scripted("dead", fail=Unavailable("down", code="backend_unreachable"))
    busy = Scripted("busy", fail=Overloaded("full", code="queue_full"))
    good = Scripted("good")
    opened, chunks = open_and_read(Dispatcher(health), [dead, busy, good])
    assert [c.text for c in chunks] == ["", "a", "b"]
    assert opened.provenance.backend == "good" and opened.provenance.fallback is None
    assert opened.first.version == PRIMARY
    assert [a.outcome for a in opened.provenance.attempts] == [
        "backend_unreachable",
        "queue_full",
        "ok",
    ]
    assert failures(health, "dead") == 1  # counted
    assert health.breaker("dead").state is BreakerState.OPEN
    assert failures(health, "busy") == 0  # overloaded: not counted
    assert health.breaker("good").snapshot().calls == 1  # the whole stream: a success
    assert dead.closed and busy.closed and good.closed


def test_an_open_breaker_is_skipped_and_all_open_says_when_to_retry() -> None:
    health = board()
    dead = Scripted("dead", fail=Unavailable("down"))
    open_and_read(Dispatcher(health), [dead, Scripted("good")])
    assert health.breaker("dead").state is BreakerState.OPEN
    open_and_read(Dispatcher(health), [dead, Scripted("good")])
    assert dead.calls == 1  # not tried again while open
    with pytest.raises(Unavailable) as caught:
        open_and_read(Dispatcher(health), [dead])
    assert caught.value.code == "no_available_backend"
    assert caught.value.extra["retry_after"] >= 1


def test_a_request_error_is_raised_at_once_without_fallback() -> None:
    health = board()
    bad = Scripted("bad", fail=InvalidInput("no", code="invalid_request"))
    other = Scripted("other")
    with pytest.raises(InvalidInput):
        open_and_read(Dispatcher(health), [bad, other], [VersionOption(OTHER, (Scripted("fb"),))])
    assert other.calls == 0 and failures(health, "bad") == 0


def test_only_version_steps_of_the_chain_can_stream() -> None:
    health = board()
    dead = Scripted("dead", fail=Unavailable("down"))
    fallback_backend = Scripted("fb", words=("x",))
    static = StaticOption({"text": np.array([b"fixed"], dtype=object)})
    cache = CacheOption(AnswerCache(max_entries=4, ttl_seconds=60))
    chain: list[FallbackOption] = [static, cache, VersionOption(OTHER, (fallback_backend,))]
    opened, chunks = open_and_read(Dispatcher(health), [dead], chain)
    assert [c.text for c in chunks] == ["", "x"]
    assert opened.provenance.fallback is FallbackKind.VERSION
    assert opened.provenance.version == OTHER and opened.first.version == OTHER
    assert opened.provenance.reason == "unavailable"

    with pytest.raises(Unavailable) as caught:
        open_and_read(Dispatcher(health), [dead], [static, UnavailableOption("try later")])
    assert caught.value.code == "endpoint_unavailable"
    with pytest.raises(Unavailable) as caught:
        open_and_read(Dispatcher(health), [dead], [static, cache])
    assert caught.value.code == "no_available_backend"  # the primary's own failure


def test_a_replica_whose_context_is_too_small_is_never_tried() -> None:
    small = Scripted("small", context_length=8)
    big = Scripted("big")
    opened, _ = open_and_read(Dispatcher(board()), [small, big], req=request(prompt="x" * 40))
    assert small.calls == 0 and opened.provenance.backend == "big"
    with pytest.raises(Unavailable) as caught:
        open_and_read(Dispatcher(board()), [small], req=request(prompt="x" * 40))
    assert caught.value.code == "no_capable_backend"


@pytest.mark.parametrize(
    ("then", "counted"),
    [(Unavailable("lost", code="backend_unreachable"), 1), (RuntimeError("bug"), 1)],
)
def test_after_the_first_chunk_a_failure_ends_the_stream_and_counts(
    then: Exception, counted: int
) -> None:
    health = board()
    broken = Scripted("broken", then=then)
    fallback_backend = Scripted("fb")
    with pytest.raises(ModelportError):
        open_and_read(Dispatcher(health), [broken], [VersionOption(OTHER, (fallback_backend,))])
    assert fallback_backend.calls == 0  # no fallback once a chunk came
    assert failures(health, "broken") == counted


def test_a_consumer_that_leaves_says_nothing_of_the_backend() -> None:
    health = board()
    good = Scripted("good", words=("a", "b", "c"))

    async def scenario() -> None:
        opened = await Dispatcher(health).open_stream(request(), [good])
        await anext(opened.rest)
        await opened.rest.aclose()  # type: ignore[attr-defined]

    asyncio.run(scenario())
    assert good.closed
    assert health.breaker("good").snapshot().calls == 0
