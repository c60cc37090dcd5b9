"""Billing fixtures: a migrated database per backend, a settable clock, the real ledger
and the billing service over them."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta

import pytest

from modelport.metering.balances import BalanceRepository
from modelport.metering.billing.service import BillingService
from modelport.metering.ledger import Ledger
from modelport.store import Database, create_database
from tests.metering.billing.factories import NOVEMBER


class Clock:
    """The time the ledger records usage at and billing decides by; tests move it."""

    def __init__(self, at: datetime = NOVEMBER) -> None:
        self.at = at

    def __call__(self) -> datetime:
        return self.at

    def advance(self, delta: timedelta) -> None:
        self.at += delta


@pytest.fixture
def database(database_url: str) -> Iterator[Database]:
    """The ``database_url`` fixture's database, already migrated."""
    db = create_database(database_url)
    yield db
    db.dispose()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def ledger(database: Database, clock: Clock) -> Ledger:
    return Ledger(database, now=clock)


@pytest.fixture
def billing(database: Database, clock: Clock) -> BillingService:
    return BillingService(database, BalanceRepository(database, now=clock), now=clock)
