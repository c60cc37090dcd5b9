"""What the usage journal costs on the request path: one ``UsageJournal.append``.

    .venv/bin/python bench/journal_bench.py
    .venv/bin/python bench/journal_bench.py -n 200000 --events 3

Appends a typical settlement (a reservation and ``--events`` priced usage events,
default 1) to a journal in a temporary folder, ``-n`` times in 5 rounds (the file
emptied before each, as the applier keeps it short), and prints
the best round's microseconds per call: the serialisation alone (``encode``), and the
whole append (serialisation, lock and one write: the journal's own ``write_line``,
which keeps the GIL, then ``os.write``, which releases it). Nothing applies the
journal meanwhile (no database is involved), so the GIL hand-off that makes
``os.write`` dearer on a busy event loop does not show here.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import timeit
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

from modelport.metering import journal as journal_module
from modelport.metering.events import priced_event
from modelport.metering.journal import UsageJournal, encode
from modelport.metering.types import (
    PriceSnapshot,
    Reservation,
    ReservationState,
    Unit,
    UsageEvent,
    UsageStatus,
)

UNITS = (Unit.PREDICTION, Unit.COMPUTE_MS, Unit.SECOND)


def settlement(events: int) -> tuple[Reservation, list[UsageEvent]]:
    now = datetime.now(UTC)
    reservation = Reservation(
        id="f" * 32,
        tenant="beta",
        key_id="k" * 16,
        amount_micros=2_500,
        levels=("balance:tenant:beta",),
        state=ReservationState.HELD,
        created_at=now,
        expires_at=now + timedelta(seconds=90),
    )
    prediction = "0123456789abcdef01234567"
    return reservation, [
        priced_event(
            event_id=f"{prediction}:{unit.value}",
            price=PriceSnapshot(3, 2_500, revenue_share_bps=7_000),
            unit=unit,
            quantity=1,
            status=UsageStatus.SUCCEEDED,
            tenant="beta",
            key_id="k" * 16,
            model="acme/adder",
            version="1",
            manifest_digest="sha256:" + "ab" * 32,
            started_at=now,
            finished_at=now,
            compute_ms=0.1234,
            wall_ms=1.234,
            request_id="r" * 32,
            prediction_id=prediction,
            reservation_id=reservation.id,
        )
        for unit in UNITS[:events]
    ]


def per_call_us(fn: Any, number: int, setup: Any = "pass") -> float:
    return min(timeit.repeat(fn, setup, number=number, repeat=5)) / number * 1e6


def empty(journal: UsageJournal) -> None:
    """Truncate the journal between rounds, as its applier does between cycles."""
    if journal.path.exists():
        journal.path.write_bytes(b"")  # its O_APPEND writes go on from 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=100_000, help="appends per round")
    parser.add_argument("--events", type=int, default=1, choices=(1, 2, 3))
    args = parser.parse_args()
    reservation, events = settlement(args.events)
    with tempfile.TemporaryDirectory() as folder:
        # No applier runs: the journal never touches its reservations.
        journal = UsageJournal(Path(folder), cast(Any, None))
        line = encode(reservation, events)
        encoded = per_call_us(lambda: encode(reservation, events), args.n)
        appended = {}
        for name, write in (("write_line", journal_module.write_line), ("os.write", os.write)):
            journal_module.write_line = write
            appended[name] = per_call_us(
                lambda: journal.append(reservation, events), args.n, lambda: empty(journal)
            )
    print(f"settlement of {len(events)} event(s): {len(line)} bytes a line")
    print(f"encode  {encoded:6.2f} µs/call")
    for name, us in appended.items():
        print(f"append  {us:6.2f} µs/call (encode, lock, one {name})")


if __name__ == "__main__":
    main()
