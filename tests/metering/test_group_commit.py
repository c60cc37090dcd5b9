"""Group commit of settlements: concurrent calls share transactions, every one of them is
durable (and billed once) before its caller is answered, and one bad settlement fails
only its own call."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence

import pytest

from modelport.metering.commit import SettlementCommitter
from modelport.metering.meter import InferenceMeter
from modelport.metering.reservations import Reservations
from modelport.metering.types import (
    BalanceScope,
    Reservation,
    UsageEvent,
)
from tests.metering.conftest import PRICE, Metering, call_info, price_predictions


async def metered_call(meter: InferenceMeter, n: int = 0) -> str:
    async with meter.metered(call_info(n)) as metered:
        metered.record(compute_seconds=0.001)
    return metered.prediction_id


@pytest.fixture
def priced(metering: Metering) -> Metering:
    return price_predictions(metering, 1_000 * PRICE)


def test_concurrent_settlements_share_transactions_and_all_are_durable(
    priced: Metering,
) -> None:
    async def main() -> list[str]:
        return await asyncio.gather(*(metered_call(priced.meter, n) for n in range(120)))

    ids = asyncio.run(main())
    committer = priced.meter.committer
    assert 1 <= committer.batches < 120  # grouped: far fewer commits than calls
    assert priced.outbox.pending() == 120  # every answered call is in the outbox
    balance = priced.balances.get(BalanceScope.TENANT, "beta")
    assert balance.balance_micros == (1_000 - 120) * PRICE
    assert balance.reserved_micros == 0
    # Delivered twice over, still billed once per call.
    claimed = priced.outbox.claim()
    assert len(set(e.event_id for e in claimed.events)) == 120
    priced.sink.deliver(claimed.events)
    priced.sink.deliver(claimed.events)
    priced.outbox.ack(claimed.ids)
    entries = priced.ledger.entries()
    assert sorted(e.event.prediction_id for e in entries) == sorted(ids)
    assert {e.event.amount_micros for e in entries} == {PRICE}


class Gated(Reservations):
    """Real reservations whose settlements wait for ``gate`` (set ``entered`` first) and
    fail for one chosen request id."""

    def __init__(self, inner: Reservations, request_id: str = "") -> None:
        self.__dict__.update(inner.__dict__)
        self.request_id = request_id
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.sizes: list[int] = []

    def settle_many(self, calls: Sequence[tuple[Reservation | None, Sequence[UsageEvent]]]) -> None:
        self.entered.set()
        self.gate.wait(30)
        self.sizes.append(len(calls))
        if self.request_id and any(
            e.request_id == self.request_id for _, events in calls for e in events
        ):
            raise RuntimeError("settlement refused")
        super().settle_many(calls)


def gated_meter(metering: Metering, fail_request: str = "") -> tuple[InferenceMeter, Gated]:
    gated = Gated(metering.reservations, fail_request)
    committer = SettlementCommitter(gated)
    return InferenceMeter(metering.prices, gated, now=metering.clock, committer=committer), gated


def test_no_answer_before_its_commit(priced: Metering) -> None:
    meter, gated = gated_meter(priced)

    async def main() -> None:
        task = asyncio.create_task(metered_call(meter))
        while not gated.entered.is_set():
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)
        assert not task.done(), "answered before its settlement was committed"
        assert priced.outbox.pending() == 0
        gated.gate.set()
        await asyncio.wait_for(task, 30)
        assert priced.outbox.pending() == 1  # answered: durable

    asyncio.run(main())


def test_a_caller_gone_before_the_commit_is_still_billed(priced: Metering) -> None:
    meter, gated = gated_meter(priced)

    async def main() -> None:
        task = asyncio.create_task(metered_call(meter))
        while not gated.entered.is_set():
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        gated.gate.set()
        while meter.committer.batches == 0:
            await asyncio.sleep(0.01)

    asyncio.run(main())
    priced.outbox.drain(priced.sink)
    assert [e.event.status.value for e in priced.ledger.entries()] == ["succeeded"]
    balance = priced.balances.get(BalanceScope.TENANT, "beta")
    assert (balance.balance_micros, balance.reserved_micros) == (999 * PRICE, 0)


def test_a_failed_settlement_fails_only_its_own_call(priced: Metering) -> None:
    meter, failing = gated_meter(priced, "req-3")
    committer = meter.committer

    async def main() -> list[str | BaseException]:
        first = asyncio.create_task(metered_call(meter, 100))
        while not failing.entered.is_set():  # the committer took it and waits at the gate
            await asyncio.sleep(0.01)
        tasks = [asyncio.create_task(metered_call(meter, n)) for n in range(8)]
        while committer.pending < 8:
            await asyncio.sleep(0.01)
        failing.gate.set()
        return await asyncio.gather(first, *tasks, return_exceptions=True)

    results = asyncio.run(main())
    assert failing.sizes == [1, 8, *[1] * 8]  # the batch failed, then each call alone
    errors = [r for r in results if isinstance(r, BaseException)]
    assert len(errors) == 1 and str(errors[0]) == "settlement refused"
    assert isinstance(results[1 + 3], RuntimeError)
    assert priced.outbox.pending() == 8
    balance = priced.balances.get(BalanceScope.TENANT, "beta")
    # The refused call's hold stays until the sweeper expires it; the others settled.
    assert balance.balance_micros == (1_000 - 8) * PRICE
    assert balance.reserved_micros == PRICE
