"""The arithmetic of a charge: integer micro-units, fractional prices, failure rules,
the publisher's share."""

from __future__ import annotations

import pytest

from modelport.metering.types import FREE, FailureRule, PriceSnapshot, UsageStatus

S = UsageStatus


@pytest.mark.parametrize(
    ("price", "quantity", "status", "amount"),
    [
        (PriceSnapshot(1, 2_000), 3, S.SUCCEEDED, 6_000),
        # one micro-unit per 1,000 tokens: 2,500 tokens cost 2 (rounded down, never up)
        (PriceSnapshot(1, 1, per_units=1000), 2_500, S.SUCCEEDED, 2),
        (PriceSnapshot(1, 3, per_units=1000), 999, S.SUCCEEDED, 2),
        (PriceSnapshot(1, 2_000), 0, S.SUCCEEDED, 0),
        # failed or timed out: by the failure rule
        (PriceSnapshot(1, 2_000, failure_rule=FailureRule.NONE), 1, S.FAILED, 0),
        (PriceSnapshot(1, 2_000, failure_rule=FailureRule.NONE), 1, S.TIMEOUT, 0),
        (PriceSnapshot(1, 2_000, failure_rule=FailureRule.FULL), 1, S.FAILED, 2_000),
        (PriceSnapshot(1, 2_000, failure_rule=FailureRule.FULL), 1, S.TIMEOUT, 2_000),
        (
            PriceSnapshot(1, 2_000, failure_rule=FailureRule.FRACTION, failure_bps=2_500),
            1,
            S.TIMEOUT,
            500,
        ),
        (
            PriceSnapshot(1, 3, failure_rule=FailureRule.FRACTION, failure_bps=5_000),
            1,
            S.FAILED,
            1,
        ),
        # cancelled work is charged in full for the quantity that was done
        (PriceSnapshot(1, 2_000, failure_rule=FailureRule.NONE), 2, S.CANCELLED, 4_000),
        (FREE, 10, S.SUCCEEDED, 0),
    ],
)
def test_amount(price: PriceSnapshot, quantity: int, status: UsageStatus, amount: int) -> None:
    charged = price.amount(quantity, status)
    assert charged == amount
    assert isinstance(charged, int)


def test_publisher_share_is_rounded_down_and_the_platform_keeps_the_rest() -> None:
    price = PriceSnapshot(1, 1_001, revenue_share_bps=7_000)
    amount = price.amount(1)
    assert price.publisher_share(amount) == 700  # 700.7
    assert PriceSnapshot(1, 10, revenue_share_bps=10_000).publisher_share(10) == 10
    assert PriceSnapshot(1, 10, revenue_share_bps=0).publisher_share(10) == 0


def test_huge_quantities_stay_exact() -> None:
    price = PriceSnapshot(1, 7, per_units=3)
    quantity = 10**15 + 1
    assert price.amount(quantity) == quantity * 7 // 3
