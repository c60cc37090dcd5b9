"""Metering: usage events, the outbox and the deduplicating ledger, the price book,
balances and reservations (reserve before work, settle after), and billing on top.
See docs/metering.md."""

from modelport.metering.meter import InferenceMeter, MeteredCall
from modelport.metering.service import MeteringService
from modelport.metering.types import (
    Balance,
    BalanceScope,
    CallInfo,
    FailureRule,
    LedgerEntry,
    PriceRule,
    PriceSnapshot,
    Reservation,
    Unit,
    UsageEvent,
    UsageStatus,
)

__all__ = [
    "Balance",
    "BalanceScope",
    "CallInfo",
    "FailureRule",
    "InferenceMeter",
    "LedgerEntry",
    "MeteredCall",
    "MeteringService",
    "PriceRule",
    "PriceSnapshot",
    "Reservation",
    "Unit",
    "UsageEvent",
    "UsageStatus",
]
