"""Reconciliation: reservations taken in a period against what they settled and what
the ledger charged, with a variance threshold and the reservations that need care."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from modelport.errors import InvalidInput
from modelport.metering.balances import BalanceRepository
from modelport.metering.billing.reconcile import reconcile, variance_bps
from modelport.metering.billing.service import BillingService
from modelport.metering.billing.types import Anomaly
from modelport.metering.ledger import Ledger
from modelport.metering.outbox import LedgerSink, Outbox
from modelport.metering.reservations import Reservations
from modelport.metering.types import BalanceScope, Reservation, ReservationState
from modelport.store import Database
from tests.metering.billing.conftest import Clock
from tests.metering.billing.factories import event, price


@pytest.mark.parametrize(
    ("reserved", "settled", "bps"),
    [(10_000, 8_000, 2_000), (3, 2, 3_333), (3, 4, -3_333), (0, 0, 0), (0, 5, -10_000), (7, 7, 0)],
)
def test_variance_in_basis_points_rounds_toward_zero(reserved: int, settled: int, bps: int) -> None:
    assert variance_bps(reserved, settled) == bps


def _reservation(
    rid: str, amount: int, settled: int | None, state: ReservationState
) -> Reservation:
    at = datetime(2026, 11, 5, tzinfo=UTC)
    return Reservation(rid, "acme", None, amount, ("budget:acme",), state, at, at, settled, None)


def test_the_threshold_flags_a_tenant_and_not_below_it() -> None:
    rows = [(_reservation("a", 10_000, 7_000, ReservationState.SETTLED), 7_000)]
    now = datetime(2026, 12, 1, tzinfo=UTC)
    assert reconcile("2026-11", rows, threshold_bps=3_000, now=now).rows[0].flagged is False
    report = reconcile("2026-11", rows, threshold_bps=2_999, now=now)
    assert report.rows[0].flagged and report.rows[0].variance_micros == 3_000
    assert report.flagged and not report.findings


def test_reservations_against_settlements_and_the_ledger(
    billing: BillingService, database: Database, ledger: Ledger, clock: Clock
) -> None:
    BalanceRepository(database, now=clock).credit(
        BalanceScope.TENANT, "globex", 1_000_000, tenant="globex"
    )
    outbox = Outbox(database, now=clock)
    reservations = Reservations(database, outbox, now=clock)

    def reserve(amount: int) -> Reservation:
        taken = reservations.reserve("globex", None, amount, ttl_seconds=60)
        assert taken is not None
        return taken

    def charged(reservation: Reservation, *amounts: int) -> list:
        return [event("globex", snapshot=price(a), reservation_id=reservation.id) for a in amounts]

    fits = reserve(10_000)
    reservations.settle(fits, charged(fits, 8_000))
    two_units = reserve(10_000)
    reservations.settle(two_units, charged(two_units, 1_000, 1_000))
    too_small = reserve(1_000)
    reservations.settle(too_small, charged(too_small, 4_000))  # the hold was no upper bound
    reservations.release(reserve(5_000))
    crashed = reserve(5_000)
    clock.advance(timedelta(minutes=2))
    assert reservations.sweep() == 1  # the crashed call's hold expires
    stuck = reserve(5_000)  # held past its expiry: no sweeper ran since
    outbox.drain(LedgerSink(ledger))
    undelivered = reserve(2_000)
    reservations.settle(undelivered, charged(undelivered, 2_000))  # still in the outbox
    clock.advance(timedelta(minutes=2))

    report = billing.reconcile("2026-11", threshold_bps=4_000)
    [row] = report.rows
    assert (row.reservations, row.settled, row.released, row.expired, row.held) == (7, 4, 1, 1, 1)
    assert row.reserved_micros == 23_000 and row.settled_micros == 16_000
    assert row.ledger_micros == 14_000  # the undelivered 2,000 has not reached the ledger
    assert row.variance_micros == 7_000 and row.variance_bps == 3_043 and not row.flagged
    findings = {(f.anomaly, f.reservation_id) for f in report.findings}
    assert findings == {
        (Anomaly.UNDER_RESERVED, too_small.id),
        (Anomaly.STUCK, stuck.id),
        (Anomaly.LEDGER_MISMATCH, undelivered.id),
    }
    assert crashed.id not in {f.reservation_id for f in report.findings}
    assert billing.reconcile("2026-11", threshold_bps=3_000).rows[0].flagged
    assert billing.reconcile("2026-10").rows == ()
    with pytest.raises(InvalidInput):
        billing.reconcile("2026-11", threshold_bps=-1)
