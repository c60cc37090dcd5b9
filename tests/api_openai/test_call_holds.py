"""A caller's hold (``Caller.hold_id``, a job's) reaches a streamed call as it reaches a
unary one (``tests/jobs/test_job_holds.py``): each repeatable call's reservation is drawn
from the hold, not held again beside it, and settled; the balance is held once."""

from __future__ import annotations

import asyncio
import time

from sqlalchemy import select

from modelport.api.openai.embeddings import EmbeddingDecoder
from modelport.api.openai.requests import parse_embedding
from modelport.inference.streaming import GenerateRequest
from modelport.inference.types import Caller, ModelTarget
from modelport.metering.meter import repeatable_id
from modelport.store.tables import ReservationRow
from modelport.tenancy.types import Principal
from tests.api_openai.conftest import World

CREDIT = 100_000
PRICE = 1_000
HOLD = "h" * 32


def _rows(world: World) -> dict[str, tuple[int, str]]:
    """beta's reservations: id → (amount, state)."""
    with world.services.database.transaction() as session:
        rows = session.scalars(select(ReservationRow).where(ReservationRow.tenant == "beta"))
        return {row.id: (row.amount_micros, row.state) for row in rows}


def test_a_stream_draws_from_the_callers_hold_as_a_unary_call_does(world: World) -> None:
    world.credit(CREDIT)
    world.price("acme/embedder", "prediction", PRICE)  # a unary call holds PRICE
    world.price("acme/writer", "output_token", PRICE)  # a stream of 4 tokens holds 4 PRICE
    metering = world.services.metering
    hold = metering.reservations.reserve(
        "beta", None, 10 * PRICE, ttl_seconds=300, reservation_id=HOLD
    )
    assert hold is not None
    principal = Principal(
        id="beta/app", roles=frozenset({"consumer"}), tenant="beta", key_id=world.key_id
    )
    inference = world.services.inference

    async def calls() -> str:
        unary = Caller(principal, call_id="job:j:embed", hold_id=HOLD)
        decoder = EmbeddingDecoder(parse_embedding({"model": "acme/embedder", "input": "x"}))
        await inference.infer(unary, ModelTarget("acme", "embedder"), decoder)
        streamed = Caller(principal, call_id="job:j:write", hold_id=HOLD)
        request = GenerateRequest(prompt="hello", max_tokens=4)
        target = ModelTarget("acme", "writer")
        stream = await inference.stream(streamed, target, request, time.monotonic() + 30)
        async with stream:
            return "".join([chunk.text async for chunk in stream])

    assert asyncio.run(calls()) == "hello"
    # Both drawn from the hold (one prediction, then one output token delivered of 4).
    assert world.balance() == (CREDIT - 2 * PRICE, 5 * PRICE)
    assert _rows(world) == {
        HOLD: (5 * PRICE, "held"),
        repeatable_id("job:j:embed"): (PRICE, "settled"),
        repeatable_id("job:j:write"): (4 * PRICE, "settled"),
    }


def test_a_generation_without_a_bound_is_held_for_the_context_and_runs_to_its_end(
    world: World,
) -> None:
    """No ``max_tokens`` (a chat that sets none): the call is held for the model's context
    (``DEFAULT_CONTEXT_BOUND`` for a version that declares none), and the engine is told
    the bound is the context's end, to cut after the prompt."""
    from modelport.inference.steps.read import DEFAULT_CONTEXT_BOUND

    world.credit(CREDIT * 100)
    world.price("acme/writer", "output_token", PRICE)
    principal = Principal(
        id="beta/app", roles=frozenset({"consumer"}), tenant="beta", key_id=world.key_id
    )
    inference = world.services.inference

    async def call() -> tuple[str, dict[str, tuple[int, str]]]:
        request = GenerateRequest(prompt="hello world", max_tokens=None)
        caller = Caller(principal, call_id="unbounded")
        target = ModelTarget("acme", "writer")
        stream = await inference.stream(caller, target, request, time.monotonic() + 30)
        held = _rows(world)
        async with stream:
            return "".join([chunk.text async for chunk in stream]), held

    text, held = asyncio.run(call())
    assert text == "hello world"
    assert [amount for amount, _ in held.values()] == [DEFAULT_CONTEXT_BOUND * PRICE]
    sent = world.engine.records[-1].request
    assert (sent.max_tokens, sent.to_context_end) == (DEFAULT_CONTEXT_BOUND, True)
    assert world.balance()[0] == CREDIT * 100 - 2 * PRICE  # two tokens delivered
