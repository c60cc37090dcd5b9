"""What the usage-journal applier spends per event on the SQLite ledger: ``decode`` of
the journal lines, then ``Ledger.record``.

    .venv/bin/python bench/ledger_apply.py
    .venv/bin/python bench/ledger_apply.py -n 20000 --batch 100

Builds ``-n`` journal lines (one settlement of one priced event each, sequential
ids and timestamps as the meter writes them), applies them in groups of ``--batch``
to a fresh, migrated SQLite database, and prints the applying thread's CPU time
(``time.thread_time``) per event, in 3 rounds: the ledger as it is (rows built
straight from the documents, ``sqlite_row``), and the general path as the baseline
(every row through ``event_row`` and SQLAlchemy's bind processors, what the ledger
does with a document whose timestamps are in another form), with their ratio.
Both insert the same rows (the database work is the same).
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from unittest import mock

from modelport.ids import unique_id
from modelport.metering import ledger as ledger_module
from modelport.metering.events import event_to_doc, priced_event
from modelport.metering.journal import decode, encode_docs
from modelport.metering.types import PriceSnapshot, Unit, UsageStatus
from modelport.store import create_database
from modelport.store.migrate import upgrade

PRICE = PriceSnapshot(3, 2_500, revenue_share_bps=7_000)


def journal_lines(count: int) -> list[bytes]:
    """``count`` journal lines (without their newline), one metered call each."""
    start = datetime.now(UTC)
    lines = []
    for index in range(count):
        prediction = unique_id()
        began = start + timedelta(milliseconds=index)
        event = priced_event(
            event_id=f"{prediction}:prediction",
            price=PRICE,
            unit=Unit.PREDICTION,
            quantity=1,
            status=UsageStatus.SUCCEEDED,
            tenant="beta",
            key_id="k" * 16,
            model="acme/mlp",
            version="1",
            manifest_digest="sha256:" + "a" * 64,
            started_at=began,
            finished_at=began + timedelta(microseconds=1_250),
            task="predict",
            compute_ms=0.5,
            wall_ms=1.25,
            request_id=unique_id(),
            prediction_id=prediction,
            source="inference",
            reservation_id="r" * 32,
        )
        lines.append(encode_docs(None, [event_to_doc(event)])[:-1])
    return lines


@contextlib.contextmanager
def fresh_ledger() -> Iterator[ledger_module.Ledger]:
    """A ledger on a new, migrated SQLite database."""
    home = Path(tempfile.mkdtemp(prefix="ledger-apply-"))
    url = f"sqlite:///{home / 'ledger.db'}"
    upgrade(url)
    database = create_database(url)
    try:
        yield ledger_module.Ledger(database)
    finally:
        database.dispose()
        shutil.rmtree(home, ignore_errors=True)


def apply(lines: list[bytes], batch: int, *, general: bool) -> float:
    """Thread CPU µs per event of decoding and recording ``lines``."""
    with fresh_ledger() as ledger, contextlib.ExitStack() as stack:
        if general:  # no row is fast: each takes the general path
            stack.enter_context(mock.patch.object(ledger_module, "sqlite_row", lambda *_: None))
        count = 0
        began = time.thread_time()
        for first in range(0, len(lines), batch):
            events = [e for line in lines[first : first + batch] for e in decode(line)[1]]
            count += len(ledger.record(events).inserted)
        spent = time.thread_time() - began
    assert count == len(lines), "every event is new"
    return spent / count * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("-n", type=int, default=10_000, help="journal lines (events)")
    parser.add_argument("--batch", type=int, default=100, help="lines per Ledger.record")
    args = parser.parse_args()
    print(f"{args.n} events, {args.batch} per batch: thread CPU µs per event")
    fast, general = [], []
    for _ in range(3):
        fast.append(apply(journal_lines(args.n), args.batch, general=False))
        general.append(apply(journal_lines(args.n), args.batch, general=True))
        print(f"  ledger {fast[-1]:6.1f}   general path {general[-1]:6.1f}")
    print(
        f"best: ledger {min(fast):.1f}, general path {min(general):.1f}, "
        f"ratio {min(fast) / min(general):.2f}"
    )


if __name__ == "__main__":
    main()
