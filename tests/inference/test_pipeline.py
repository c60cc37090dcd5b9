"""The inference pipeline: every call, of a version or an endpoint, unary or streamed,
runs the same named steps in the one written order (``inference.pipeline.STEPS``),
leaving out only those that do not apply; a stream's last steps run when it ends,
whatever ends it. Observed through the pipeline's ``observer``, on the real service."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import pytest

from modelport.api.openai.embeddings import EmbeddingDecoder
from modelport.api.openai.requests import parse_embedding
from modelport.errors import ModelportError
from modelport.inference.call import Call, Kind, Mode
from modelport.inference.pipeline import STEPS, Env, Pipeline, Step, plan_of
from modelport.inference.streaming import GenerateRequest
from modelport.inference.types import (
    Caller,
    EndpointTarget,
    InferenceResult,
    ModelTarget,
    Target,
)
from modelport.tenancy.limits import ScopeType
from modelport.tenancy.types import Principal
from tests.api_openai.conftest import World, build_world

ORDER = [step.name for step in STEPS]
UNARY = [
    "resolve",
    "authorize",
    "read",
    "degrade",
    "admit",
    "moderate",
    "reserve",
    "dispatch",
    "record",
    "settle",
    "release",
    "answer",
]
STREAM_HEAD = UNARY[:8]
STREAM_TAIL = ["record", "settle", "release"]


def test_the_order_is_written_once_and_each_step_is_named_once() -> None:
    assert ORDER == UNARY
    assert len(set(ORDER)) == len(ORDER)


@pytest.mark.parametrize("kind", list(Kind))
def test_plans_leave_out_what_does_not_apply_and_keep_the_order(kind: Kind) -> None:
    unary = plan_of(STEPS, kind, Mode.UNARY, resolved=False)
    assert [s.name for s in unary.head] == UNARY and unary.tail == ()
    stream = plan_of(STEPS, kind, Mode.STREAM, resolved=False)
    assert [s.name for s in stream.head] == STREAM_HEAD
    assert [s.name for s in stream.tail] == STREAM_TAIL  # run when the stream ends
    handed = plan_of(STEPS, kind, Mode.STREAM, resolved=True)  # a version found by its caller
    assert [s.name for s in handed.head] == STREAM_HEAD[2:]
    # What a failure gives back, latest first: the reservation, the admission, the key.
    assert [s.name for s in unary.undo] == ["reserve", "admit", "read"]


@pytest.fixture
def traced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[World, list[tuple[Target | None, str]]]]:
    """The ``/v1`` platform on SQLite (``tests.api_openai``), its pipeline observed."""
    world = build_world(tmp_path / "home", f"sqlite:///{tmp_path / 'home.db'}", monkeypatch)
    seen: list[tuple[Target | None, str]] = []

    def observe(call: Call, step: str) -> None:
        seen.append((call.target, step))

    world.services.inference.pipeline.observer = observe
    yield world, seen
    world.close()


def _caller(world: World) -> Caller:
    return Caller(
        Principal(id="beta/app", roles=frozenset({"consumer"}), tenant="beta", key_id=world.key_id)
    )


def _steps(seen: list[tuple[Target | None, str]], target: Target) -> list[str]:
    return [step for called, step in seen if called == target]


def test_each_target_and_mode_runs_the_steps_in_the_written_order(
    traced: tuple[World, list[tuple[Target | None, str]]],
) -> None:
    world, seen = traced
    world.deploy("embed", "acme/embedder:1")
    world.deploy("chat", "acme/writer:1")
    inference = world.services.inference
    embedder, embed = ModelTarget("acme", "embedder"), EndpointTarget("embed")
    writer, chat = ModelTarget("acme", "writer"), EndpointTarget("chat")

    async def calls() -> list[str]:
        texts = []
        for target in (embedder, embed):
            decoder = EmbeddingDecoder(parse_embedding({"model": "m", "input": "a text"}))
            result = await inference.infer(_caller(world), target, decoder)
            assert isinstance(result, InferenceResult) and result.usage.input_tokens
        for target in (writer, chat):
            request = GenerateRequest(prompt="hello", max_tokens=4)
            stream = await inference.stream(_caller(world), target, request, time.monotonic() + 30)
            assert _steps(seen, target) == STREAM_HEAD  # handed over: the rest at its end
            async with stream:
                texts.append("".join([chunk.text async for chunk in stream]))
        return texts

    assert asyncio.run(calls()) == ["hello", "hello"]
    for target in (embedder, embed):
        assert _steps(seen, target) == UNARY, target
    for target in (writer, chat):
        assert _steps(seen, target) == STREAM_HEAD + STREAM_TAIL, target


def test_a_refused_call_stops_at_its_step_and_a_failed_stream_still_ends(
    traced: tuple[World, list[tuple[Target | None, str]]],
) -> None:
    world, seen = traced
    world.services.limits.set_limits(
        ScopeType.TENANT, "beta", tenant=None, rpm=2, concurrency=1, tpm=None, actor="test"
    )
    inference = world.services.inference
    writer, embedder = ModelTarget("acme", "writer"), ModelTarget("acme", "embedder")
    request = GenerateRequest(prompt="hello", max_tokens=4)

    async def calls() -> tuple[str, str, str]:
        # A tensor model cannot stream: its backend refuses at the first chunk, after the
        # call was admitted and held; its last steps give both back.
        with pytest.raises(ModelportError) as cannot:
            await inference.stream(_caller(world), embedder, request, time.monotonic() + 30)
        # The one concurrency slot is free again: the next call is let in.
        stream = await inference.stream(_caller(world), writer, request, time.monotonic() + 30)
        async with stream:
            text = "".join([chunk.text async for chunk in stream])
        caller = _caller(world)
        with pytest.raises(ModelportError) as limited:
            await inference.stream(caller, writer, request, time.monotonic() + 30)
        assert caller.rate is not None  # the decision, for the surface's headers
        return cannot.value.code, text, limited.value.code

    cannot, text, limited = asyncio.run(calls())
    assert cannot != "concurrency_limited" and text == "hello"
    assert _steps(seen, embedder) == STREAM_HEAD + STREAM_TAIL
    assert limited == "rate_limited"
    refused = ["resolve", "authorize", "read", "degrade", "admit"]  # nothing after the refusal
    assert _steps(seen, writer) == STREAM_HEAD + STREAM_TAIL + refused


def test_a_failure_gives_back_what_every_begun_step_holds_latest_first() -> None:
    """The runner's contract, on steps of its own: the step that raised is undone too
    (it may hold part of what it takes, as read holds an idempotency key once claimed),
    the steps after it never run, and a unary call that ended whole undoes nothing."""
    log: list[str] = []

    def step(name: str, *, fails: bool = False, undo: bool = True) -> Step:
        async def run(env: Env, call: Call) -> None:
            log.append(name)
            if fails:
                raise RuntimeError(name)

        async def give_back(env: Env, call: Call, exc: BaseException) -> None:
            log.append(f"undo {name}")

        return Step(name, run, undo=give_back if undo else None)

    caller = Caller(Principal(id="a", roles=frozenset()))

    def run(*steps: Step) -> None:
        call = Call(caller, ModelTarget("acme", "m"), Mode.UNARY, Kind.VERSION)
        asyncio.run(Pipeline(cast(Env, None), steps).run(call))

    with pytest.raises(RuntimeError):
        run(step("a"), step("b", undo=False), step("c", fails=True), step("d"))
    assert log == ["a", "b", "c", "undo c", "undo a"]
    log.clear()
    run(step("a", undo=False), step("b", undo=False))
    assert log == ["a", "b"]
