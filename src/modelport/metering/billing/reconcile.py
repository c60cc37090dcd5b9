"""The reconciliation report: reservations against what they settled (pure).

A reservation holds a call's upper-bound cost; settling charges what the call
actually cost and gives the rest back. Per tenant, the report adds up what the
settled reservations held and charged, and flags a tenant whose variance (held
beyond the cost, in basis points of what was held) is over the threshold: its
reservations tie up more of its money than its calls need. It also lists single
reservations that are wrong whatever the threshold: settled above what they held,
settled at an amount the ledger does not show, or held past their expiry.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from modelport.metering.billing.types import (
    Anomaly,
    ReconciliationReport,
    ReconciliationRow,
    ReservationFinding,
)
from modelport.metering.types import BPS, Reservation, ReservationState


@dataclass
class _Tally:
    reservations: int = 0
    settled: int = 0
    released: int = 0
    expired: int = 0
    held: int = 0
    reserved: int = 0
    charged: int = 0
    ledger: int = 0


def variance_bps(reserved: int, settled: int) -> int:
    """``reserved - settled`` in basis points of ``reserved``, rounded toward zero (a
    charge with nothing held counts as -100%)."""
    if reserved == 0:
        return 0 if settled == 0 else -BPS
    variance = reserved - settled
    magnitude = abs(variance) * BPS // reserved
    return magnitude if variance >= 0 else -magnitude


def reconcile(
    period: str,
    reservations: Iterable[tuple[Reservation, int]],
    *,
    threshold_bps: int,
    now: datetime,
) -> ReconciliationReport:
    """The report over ``reservations``, each with the ledger's charges against it."""
    tallies: dict[str, _Tally] = {}
    findings: list[ReservationFinding] = []
    for reservation, ledger_micros in reservations:
        tally = tallies.setdefault(reservation.tenant, _Tally())
        tally.reservations += 1
        settled = reservation.settled_micros
        if settled is not None:
            tally.settled += 1
            tally.reserved += reservation.amount_micros
            tally.charged += settled
            tally.ledger += ledger_micros
        elif reservation.state is ReservationState.RELEASED:
            tally.released += 1
        elif reservation.state is ReservationState.EXPIRED:
            tally.expired += 1
        else:
            tally.held += 1
        for anomaly in _anomalies(reservation, ledger_micros, now):
            findings.append(
                ReservationFinding(
                    anomaly=anomaly,
                    reservation_id=reservation.id,
                    tenant=reservation.tenant,
                    reserved_micros=reservation.amount_micros,
                    settled_micros=settled,
                    ledger_micros=ledger_micros,
                )
            )
    rows = []
    for tenant, t in sorted(tallies.items()):
        bps = variance_bps(t.reserved, t.charged)
        rows.append(
            ReconciliationRow(
                tenant=tenant,
                reservations=t.reservations,
                settled=t.settled,
                released=t.released,
                expired=t.expired,
                held=t.held,
                reserved_micros=t.reserved,
                settled_micros=t.charged,
                ledger_micros=t.ledger,
                variance_micros=t.reserved - t.charged,
                variance_bps=bps,
                flagged=abs(bps) > threshold_bps,
            )
        )
    return ReconciliationReport(period, threshold_bps, tuple(rows), tuple(findings))


def _anomalies(reservation: Reservation, ledger_micros: int, now: datetime) -> list[Anomaly]:
    settled = reservation.settled_micros
    found = []
    if settled is not None and settled > reservation.amount_micros:
        found.append(Anomaly.UNDER_RESERVED)
    if (settled or 0) != ledger_micros:
        found.append(Anomaly.LEDGER_MISMATCH)
    if reservation.state is ReservationState.HELD and reservation.expires_at <= now:
        found.append(Anomaly.STUCK)
    return found
