"""Ledger events to invoice and statement lines: exact integer arithmetic, rounding
down per event, and indifference to order and redelivery."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from modelport.metering.billing import aggregate
from modelport.metering.billing.types import InvoiceLine, StatementLine
from modelport.metering.types import BPS, FailureRule, Unit, UsageStatus
from tests.metering.billing.factories import event, price


def test_lines_per_version_unit_and_price() -> None:
    cheap, dear = price(1_000, rule_id=1), price(1_500, rule_id=2)
    events = [
        event(version="1", snapshot=cheap),
        event(version="1", snapshot=cheap, quantity=2),
        event(version="1", snapshot=dear),  # a price change mid-period: its own line
        event(version="2", snapshot=cheap),
        event(version="2", unit=Unit.COMPUTE_MS, quantity=40, snapshot=price(3, rule_id=3)),
    ]
    lines = aggregate.invoice_lines(events)
    assert lines == (
        InvoiceLine("acme/sentiment", "1", "prediction", 1, 1_000, 1, BPS, 2, 3, 3_000),
        InvoiceLine("acme/sentiment", "1", "prediction", 2, 1_500, 1, BPS, 1, 1, 1_500),
        InvoiceLine("acme/sentiment", "2", "compute_ms", 3, 3, 1, BPS, 1, 40, 120),
        InvoiceLine("acme/sentiment", "2", "prediction", 1, 1_000, 1, BPS, 1, 1, 1_000),
    )


def test_failed_calls_are_charged_by_their_rule_on_a_line_of_their_own() -> None:
    snapshot = price(1_000, failure_rule=FailureRule.FRACTION, failure_bps=2_500)
    events = [
        event(snapshot=snapshot),
        event(snapshot=snapshot, status=UsageStatus.FAILED),
        event(snapshot=snapshot, status=UsageStatus.TIMEOUT),
        event(snapshot=price(1_000), status=UsageStatus.FAILED),  # rule none: free
        event(snapshot=snapshot, status=UsageStatus.CANCELLED),  # charged as done
    ]
    lines = {(x.price_rule_id, x.charge_bps): x for x in aggregate.invoice_lines(events)}
    assert lines[1, 2_500].events == 2 and lines[1, 2_500].amount_micros == 500
    assert lines[1, BPS].events == 2 and lines[1, BPS].amount_micros == 2_000
    assert lines[1, 0].amount_micros == 0


def test_fractions_of_a_micro_unit_are_rounded_down_per_event() -> None:
    # 1 micro per 1,000 tokens: 1,999 tokens cost 1 micro, twice 2 — not 3 for 3,998.
    snapshot = price(1, per_units=1_000)
    events = [event(unit=Unit.INPUT_TOKEN, quantity=1_999, snapshot=snapshot) for _ in range(2)]
    [line] = aggregate.invoice_lines(events)
    assert line.quantity == 3_998 and line.amount_micros == 2


def test_share_is_rounded_down_per_event_and_the_platform_keeps_the_rest() -> None:
    # 333 micros at a 50% share: the publisher gets 166 of each, the platform 167.
    events = [event(snapshot=price(333, share_bps=5_000)) for _ in range(3)]
    [line] = aggregate.statement_lines(events)
    assert line.revenue_micros == 999
    assert line.publisher_share_micros == 498
    assert line.platform_take_micros == 501
    assert line.publisher_share_micros + line.platform_take_micros == line.revenue_micros


def test_statements_go_to_the_model_owner_and_invoices_to_the_caller() -> None:
    events = [
        event("globex", "acme/a"),
        event("initech", "acme/a"),
        event("acme", "globex/b"),
    ]
    invoices = aggregate.invoices(events, "2026-11")
    statements = aggregate.statements(events, "2026-11")
    assert sorted(invoices) == ["acme", "globex", "initech"]
    assert sorted(statements) == ["acme", "globex"]
    assert statements["acme"].events == 2 and statements["acme"].revenue_micros == 2_000
    assert invoices["acme"].lines[0].model == "globex/b"


def test_each_event_counts_once_whatever_its_deliveries() -> None:
    first = event(event_id="same", quantity=1)
    again = event(event_id="same", quantity=1)
    assert aggregate.invoice_lines([first, again, first]) == aggregate.invoice_lines([first])


prices = st.builds(
    price,
    st.integers(0, 10**9),
    rule_id=st.integers(1, 3),
    per_units=st.sampled_from([1, 1_000, 1_000_000]),
    share_bps=st.integers(0, BPS),
    failure_rule=st.sampled_from(list(FailureRule)),
    failure_bps=st.integers(0, BPS),
)
events_strategy = st.lists(
    st.builds(
        event,
        st.sampled_from(["acme", "globex"]),
        st.sampled_from(["acme/a", "globex/b"]),
        st.sampled_from(["1", "2"]),
        quantity=st.integers(0, 10**6),
        unit=st.sampled_from(list(Unit)),
        status=st.sampled_from(list(UsageStatus)),
        snapshot=prices,
    ),
    max_size=30,
)


@given(events_strategy, st.randoms(use_true_random=False))
def test_lines_add_up_exactly_in_any_order(events: list, rnd: random.Random) -> None:
    shuffled = events + rnd.sample(events, k=len(events) // 2)
    rnd.shuffle(shuffled)
    assert aggregate.invoices(shuffled, "p") == aggregate.invoices(events, "p")
    assert aggregate.statements(shuffled, "p") == aggregate.statements(events, "p")
    total = sum(e.price.amount(e.quantity, e.status) for e in events)
    assert sum(c.total_micros for c in aggregate.invoices(events, "p").values()) == total
    for content in aggregate.statements(events, "p").values():
        for line in content.lines:
            assert 0 <= line.publisher_share_micros <= line.revenue_micros
            assert line.publisher_share_micros + line.platform_take_micros == line.revenue_micros
            assert isinstance(line.revenue_micros, int)


def test_statement_line_share_matches_the_ledger_figures() -> None:
    events = [event(snapshot=price(777, share_bps=3_333)) for _ in range(5)]
    [line] = aggregate.statement_lines(events)
    assert line.publisher_share_micros == sum(e.publisher_micros for e in events)
    # 777 x 33.33% = 258.97 per event: 258 each (1,290), not 1,295 of the whole 3,885.
    assert line == StatementLine("acme/sentiment", "1", "prediction", 3_333, 5, 5, 3_885, 1_290)
