"""Billing periods: calendar months in UTC."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from modelport.errors import InvalidInput
from modelport.metering.billing.periods import Period


def test_a_period_is_a_utc_calendar_month() -> None:
    period = Period.parse("2026-11")
    assert str(period) == "2026-11"
    assert period.start == datetime(2026, 11, 1, tzinfo=UTC)
    assert period.end == datetime(2026, 12, 1, tzinfo=UTC)
    assert Period.parse("2026-12").end == datetime(2027, 1, 1, tzinfo=UTC)
    assert Period.parse("2026-12").next() == Period(2027, 1)


def test_an_instant_falls_in_the_month_of_its_utc_time() -> None:
    # 23:30 on 31 October in UTC-2 is already November in UTC.
    late = datetime(2026, 10, 31, 23, 30, tzinfo=timezone(timedelta(hours=-2)))
    assert Period.of(late) == Period(2026, 11)
    assert Period(2026, 11).contains(datetime(2026, 11, 30, 23, 59, 59, 999999, tzinfo=UTC))
    assert not Period(2026, 11).contains(datetime(2026, 12, 1, tzinfo=UTC))
    with pytest.raises(ValueError):
        Period.of(datetime(2026, 11, 1))


@pytest.mark.parametrize("text", ["2026-13", "2026-00", "2026-1", "26-11", "2026/11", "", "x"])
def test_malformed_periods_are_refused(text: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        Period.parse(text)
    assert caught.value.code == "invalid_period"


def test_periods_order_by_time() -> None:
    assert sorted([Period(2027, 1), Period(2026, 12), Period(2026, 2)]) == [
        Period(2026, 2),
        Period(2026, 12),
        Period(2027, 1),
    ]
