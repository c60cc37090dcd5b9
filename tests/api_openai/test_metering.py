"""/v1 generations metered to the ledger, on SQLite and PostgreSQL: a whole answer
settles its tokens; a client that cuts a stream, or hangs up on a whole answer, stops
the engine's work and is settled ``cancelled`` for what was delivered, its hold given
back."""

from __future__ import annotations

import openai
import pytest

from modelport.metering.types import Unit, UsageEvent, UsageStatus
from tests.api_openai.conftest import World
from tests.polling import eventually

IN_PRICE, OUT_PRICE = 10, 100
CREDIT = 10_000_000
COUNT = [{"role": "user", "content": "count please"}]


def priced(world: World) -> World:
    for unit, micros in (("input_token", IN_PRICE), ("output_token", OUT_PRICE)):
        world.price("acme/counter", unit, micros, failure_rule="full")
    world.credit(CREDIT)
    return world


def token_events(world: World) -> dict[Unit, UsageEvent]:
    return {
        e.event.unit: e.event
        for e in world.entries()
        if e.event.unit in (Unit.INPUT_TOKEN, Unit.OUTPUT_TOKEN)
    }


def settled(world: World) -> dict[Unit, UsageEvent]:
    found: dict[Unit, UsageEvent] = {}

    def check() -> bool:
        found.update(token_events(world))
        return Unit.OUTPUT_TOKEN in found

    assert eventually(check), "the call was never settled"
    return found


def test_a_whole_answer_settles_its_tokens(world_on: World) -> None:
    world = priced(world_on)
    answer = world.client().chat.completions.create(
        model="acme/counter", messages=COUNT, max_tokens=4
    )
    assert answer.usage is not None
    events = settled(world)
    assert events[Unit.INPUT_TOKEN].quantity == answer.usage.prompt_tokens == 2
    assert events[Unit.OUTPUT_TOKEN].quantity == answer.usage.completion_tokens == 4
    assert {e.status for e in events.values()} == {UsageStatus.SUCCEEDED}
    assert world.balance() == (CREDIT - 2 * IN_PRICE - 4 * OUT_PRICE, 0)


def test_a_stream_cut_by_its_client_is_settled_for_what_was_delivered(world_on: World) -> None:
    world = priced(world_on)
    stream = world.client().chat.completions.create(
        model="acme/counter", messages=COUNT, max_tokens=500, stream=True
    )
    seen = []
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            seen.append(chunk.choices[0].delta.content)
        if len(seen) == 3:
            break
    stream.close()  # the client hangs up mid-stream
    assert seen == ["1", " 2", " 3"]
    assert eventually(lambda: bool(world.slow.cancelled)), "the engine was never told"
    [record] = world.slow.records
    events = settled(world)
    delivered = events[Unit.OUTPUT_TOKEN]
    assert delivered.status is UsageStatus.CANCELLED
    assert 3 <= delivered.quantity <= record.produced < 500
    assert delivered.amount_micros == delivered.quantity * OUT_PRICE
    assert events[Unit.INPUT_TOKEN].quantity == 2
    spent = 2 * IN_PRICE + delivered.quantity * OUT_PRICE
    assert world.balance() == (CREDIT - spent, 0)  # the rest of the hold given back


def test_a_client_that_hangs_up_on_a_whole_answer_ends_the_call(world_on: World) -> None:
    world = priced(world_on)
    # The engine takes 10 s for its 500 tokens; the client gives up after 2 s, long
    # enough for the call to reach the engine on a loaded machine.
    client = world.client(timeout=openai.Timeout(2.0, connect=5.0))
    with pytest.raises(openai.APITimeoutError):
        client.chat.completions.create(model="acme/counter", messages=COUNT, max_tokens=500)
    assert eventually(lambda: bool(world.slow.cancelled)), "the engine was never told"
    events = settled(world)
    delivered = events[Unit.OUTPUT_TOKEN]
    assert delivered.status is UsageStatus.CANCELLED and delivered.quantity < 500
    assert world.balance()[1] == 0
