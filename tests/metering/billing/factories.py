"""Usage events for billing tests, priced exactly as the ledger prices them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import count
from typing import Any

from modelport.metering.events import priced_event
from modelport.metering.types import FailureRule, PriceSnapshot, Unit, UsageEvent, UsageStatus

NOVEMBER = datetime(2026, 11, 10, 12, 0, tzinfo=UTC)
DECEMBER = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
"""Late enough in December for November's documents to be finalised."""
_ids = count(1)


def price(
    unit_price: int = 1_000,
    *,
    rule_id: int | None = 1,
    per_units: int = 1,
    share_bps: int = 7_000,
    failure_rule: FailureRule = FailureRule.NONE,
    failure_bps: int = 0,
) -> PriceSnapshot:
    return PriceSnapshot(
        rule_id=rule_id,
        unit_price_micros=unit_price,
        per_units=per_units,
        failure_rule=failure_rule,
        failure_bps=failure_bps,
        revenue_share_bps=share_bps,
    )


def event(
    tenant: str = "globex",
    model: str = "acme/sentiment",
    version: str = "1",
    *,
    quantity: int = 1,
    unit: Unit = Unit.PREDICTION,
    status: UsageStatus = UsageStatus.SUCCEEDED,
    snapshot: PriceSnapshot | None = None,
    at: datetime = NOVEMBER,
    event_id: str | None = None,
    **fields: Any,
) -> UsageEvent:
    """A usage event of ``tenant`` calling ``model`` (default price: 1,000 micros, 70%)."""
    return priced_event(
        event_id=event_id or f"ev-{next(_ids)}",
        price=snapshot or price(),
        unit=unit,
        quantity=quantity,
        status=status,
        tenant=tenant,
        key_id=None,
        model=model,
        version=version,
        manifest_digest="sha256:" + "0" * 64,
        started_at=at - timedelta(milliseconds=5),
        finished_at=at,
        **fields,
    )
