"""The outbox delivers at least once: rows a crashed drainer claimed but never
acknowledged are delivered again after their lease, and the ledger deduplicates."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from modelport.metering.types import UsageEvent
from tests.metering.conftest import Metering, usage_event


class Crash(Exception):
    pass


class CrashAfterDelivery:
    """Delivers into the ledger, then dies before the drainer can acknowledge."""

    def __init__(self, metering: Metering) -> None:
        self.metering = metering
        self.delivered = 0

    def deliver(self, events: Sequence[UsageEvent]) -> None:
        self.metering.ledger.record(events)
        self.delivered += len(events)
        raise Crash


def test_drain_delivers_in_order_and_empties_the_outbox(metering: Metering) -> None:
    metering.outbox.put([usage_event(f"e{i}") for i in range(7)])
    assert metering.outbox.pending() == 7
    assert metering.outbox.drain(metering.sink, limit=3) == 7
    assert metering.outbox.pending() == 0
    assert metering.ledger.count() == 7
    assert metering.outbox.drain(metering.sink) == 0


def test_events_delivered_but_not_acked_are_redelivered_and_deduplicated(
    metering: Metering,
) -> None:
    metering.outbox.put([usage_event(f"e{i}") for i in range(5)])
    crashing = CrashAfterDelivery(metering)
    with pytest.raises(Crash):
        metering.outbox.drain_once(crashing)
    assert crashing.delivered == 5 and metering.outbox.pending() == 5
    # Still claimed by the dead drainer: nobody else takes them yet.
    assert metering.outbox.drain(metering.sink) == 0
    metering.clock.advance(seconds=31)  # its lease lapses
    assert metering.outbox.drain(metering.sink) == 5
    assert metering.outbox.pending() == 0
    assert metering.ledger.count() == 5


def test_two_drainers_never_hold_the_same_rows(metering: Metering) -> None:
    metering.outbox.put([usage_event(f"e{i}") for i in range(10)])
    first = metering.outbox.claim(limit=4)
    second = metering.outbox.claim(limit=100)
    assert len(first.ids) == 4 and len(second.ids) == 6
    assert not set(first.ids) & set(second.ids)
    assert metering.outbox.claim().ids == ()


def test_an_undeliverable_batch_stays_for_later(metering: Metering) -> None:
    class Down:
        def deliver(self, events: Sequence[UsageEvent]) -> None:
            raise ConnectionError("sink unavailable")

    metering.outbox.put([usage_event("e")])
    with pytest.raises(ConnectionError):
        metering.outbox.drain_once(Down())
    metering.clock.advance(seconds=31)
    assert metering.outbox.drain(metering.sink) == 1
    assert metering.ledger.get("e") is not None
