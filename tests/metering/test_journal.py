"""The usage journal: a settlement is one line in this writer's file, applied to the
database later, the file emptied once all of it is; a bad record is set aside, a
database outage keeps everything; a dead writer's journal is recovered by another,
a live one's never touched."""

from __future__ import annotations

import asyncio
import os
import pickle
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from modelport.clock import ManualClock
from modelport.metering import journal as journal_module
from modelport.metering.events import event_to_doc
from modelport.metering.journal import REJECTED, UsageJournal
from modelport.metering.meter import InferenceMeter
from modelport.metering.outbox import Outbox
from modelport.metering.reservations import Reservations
from modelport.metering.types import (
    BalanceScope,
    Reservation,
    ReservationState,
    UsageEvent,
    UsageStatus,
)
from modelport.store import create_database
from tests.metering.conftest import PRICE, Metering, call_info, price_predictions
from tests.polling import eventually

TENANT = BalanceScope.TENANT
UNREACHABLE = "postgresql+psycopg://postgres@127.0.0.1:1/none?connect_timeout=2"


@pytest.fixture
def priced(metering: Metering) -> Metering:
    return price_predictions(metering, 100 * PRICE)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return tmp_path / "journal"


@pytest.fixture
def journal(priced: Metering, folder: Path) -> Iterator[UsageJournal]:
    built = UsageJournal(folder, priced.reservations)
    yield built
    built.close()


def settlement(metering: Metering, n: int = 0) -> tuple[Reservation, list[UsageEvent]]:
    """A priced call of beta, held and done (not settled): what the meter would append."""
    metered = metering.meter.begin(call_info(n))
    assert metered.reservation is not None
    return metered.reservation, metering.meter.settlement(metered, UsageStatus.SUCCEEDED)


def balance(metering: Metering) -> tuple[int, int]:
    b = metering.balances.get(TENANT, "beta")
    return b.balance_micros, b.reserved_micros


def ledger_ids(metering: Metering) -> list[str]:
    metering.outbox.drain(metering.sink)
    return sorted(e.event.event_id for e in metering.ledger.entries())


def lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines()


def test_a_metered_call_is_appended_then_applied_and_the_file_emptied(
    priced: Metering, journal: UsageJournal
) -> None:
    meter = InferenceMeter(priced.prices, priced.reservations, now=priced.clock, journal=journal)

    async def metered() -> str:
        async with meter.metered(call_info()) as m:
            m.record(compute_seconds=0.001)
        return m.prediction_id

    prediction = asyncio.run(metered())
    # Answered: durable in the journal, nothing applied yet (no applier runs).
    assert len(lines(journal.path)) == 1 and journal.pending == 1
    assert balance(priced) == (100 * PRICE, PRICE)
    assert priced.outbox.pending() == 0
    assert journal.flush()
    assert journal.path.stat().st_size == 0 and journal.pending == 0
    assert balance(priced) == (99 * PRICE, 0)
    assert ledger_ids(priced) == [f"{prediction}:prediction"]
    # Appends after the truncation start the file again and are applied too.
    journal.append(*settlement(priced, 1))
    assert len(lines(journal.path)) == 1
    assert journal.flush() and journal.path.stat().st_size == 0
    assert balance(priced) == (98 * PRICE, 0)


@pytest.mark.parametrize("writer", ["write_line", "os.write"])
def test_each_append_is_one_whole_line(
    priced: Metering, journal: UsageJournal, writer: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The GIL-holding ``write(2)`` and ``os.write`` (its fallback) write alike."""
    if writer == "os.write":
        monkeypatch.setattr(journal_module, "write_line", os.write)
    calls = [settlement(priced, n) for n in range(3)]
    for held, events in calls:
        journal.append(held, events)
    written = lines(journal.path)
    assert [orjson.loads(line)["r"]["id"] for line in written] == [r.id for r, _ in calls]
    assert journal.flush()
    assert balance(priced) == (97 * PRICE, 0)


def test_a_failed_write_leaves_no_torn_line(
    priced: Metering, journal: UsageJournal, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal.append(*settlement(priced, 0))
    # The disk fills up halfway through the next line.
    monkeypatch.setattr(journal_module, "write_line", lambda fd, data: os.write(fd, data[:100]))
    with pytest.raises(OSError):
        journal.append(*settlement(priced, 1))
    monkeypatch.undo()
    journal.append(*settlement(priced, 2))
    assert len(lines(journal.path)) == 2
    assert journal.flush() and journal.rejected == 0
    assert balance(priced) == (98 * PRICE, PRICE)  # the call whose write failed holds on


def test_a_failed_call_is_appended_without_a_thread(
    priced: Metering, journal: UsageJournal
) -> None:
    meter = InferenceMeter(priced.prices, priced.reservations, now=priced.clock, journal=journal)

    async def failing() -> None:
        async with meter.metered(call_info()):
            raise ValueError("bug")

    with pytest.raises(ValueError):
        asyncio.run(failing())
    [line] = lines(journal.path)
    assert orjson.loads(line)["e"][0]["status"] == "failed"
    assert journal.flush()
    assert balance(priced) == (100 * PRICE, 0)  # the failure rule is "none"


def test_the_applier_thread_applies_and_close_removes_the_empty_file(
    priced: Metering, folder: Path
) -> None:
    journal = UsageJournal(folder, priced.reservations, interval_seconds=0.01)
    journal.start()
    try:
        for n in range(20):
            journal.append(*settlement(priced, n))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if journal.pending == 0:
                break
            asyncio.run(asyncio.sleep(0.01))
        assert journal.pending == 0
        assert balance(priced) == (80 * PRICE, 0)
    finally:
        journal.close()
    assert not journal.path.exists()
    assert os.listdir(folder) == []


def test_the_applier_runs_on_the_clock_it_is_given(priced: Metering, folder: Path) -> None:
    clock = ManualClock()
    journal = UsageJournal(folder, priced.reservations, interval_seconds=60, clock=clock)
    journal.start()
    try:
        assert eventually(lambda: clock.waits == [60])  # its first cycle is done
        for n in range(3):
            journal.append(*settlement(priced, n))
        assert journal.pending == 3  # the loop is parked until the clock moves
        clock.advance(60)
        assert eventually(lambda: journal.pending == 0)
        assert balance(priced) == (97 * PRICE, 0)
    finally:
        journal.close()


def test_a_bad_record_is_set_aside_and_the_rest_applied(
    priced: Metering, journal: UsageJournal, folder: Path
) -> None:
    good = [settlement(priced, n) for n in range(3)]
    reservation, events = settlement(priced, 3)
    # An amount no BIGINT holds: the database refuses this settlement, and only it.
    poison = [UsageEvent(**{**e.__dict__, "amount_micros": 2**63}) for e in events]
    journal.append(*good[0])
    journal.append(reservation, poison)
    journal.append(*good[1])
    journal.append(*good[2])
    assert journal.flush()
    assert journal.path.stat().st_size == 0
    assert journal.rejected == 1
    [rejected] = [orjson.loads(line) for line in lines(folder / REJECTED)]
    assert orjson.loads(rejected["line"])["r"]["id"] == reservation.id
    assert rejected["error"]
    assert balance(priced) == (97 * PRICE, PRICE)  # the bad one's hold awaits the sweeper
    expected = sorted(e.event_id for _, events in good for e in events)
    assert ledger_ids(priced) == expected
    held = priced.reservations.get(reservation.id)
    assert held is not None and held.state is ReservationState.HELD


def test_a_bad_record_alone_is_set_aside_when_the_database_takes_writes(
    priced: Metering, journal: UsageJournal, folder: Path
) -> None:
    reservation, events = settlement(priced)
    journal.append(
        reservation, [UsageEvent(**{**e.__dict__, "amount_micros": 2**63}) for e in events]
    )
    assert journal.flush()
    assert journal.rejected == 1 and len(lines(folder / REJECTED)) == 1
    assert journal.path.stat().st_size == 0


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("finished_at", "2026-02-31T12:00:00+00:00"),  # the meter's form, an impossible day
        ("started_at", "2026-12-01T12:00:00"),  # no offset: the ledger refuses naive times
        ("unit", "parsec"),
    ],
)
def test_an_event_the_ledger_refuses_is_set_aside_with_the_ledgers_error(
    priced: Metering, folder: Path, field: str, value: str
) -> None:
    """Straight to the ledger (the journal as the outbox): the settlement whose event
    document the ledger cannot store is rejected with the ledger's error, the rest
    applied."""
    if field == "started_at" and priced.database.dialect == "postgresql":
        pytest.skip("PostgreSQL reads a naive time in the session's zone")
    journal = UsageJournal(folder, priced.reservations, sink=priced.sink)
    try:
        good, (reservation, events) = settlement(priced, 0), settlement(priced, 1)
        bad = [{**event_to_doc(e), field: value} for e in events]
        journal.append(*good)
        journal.append_docs(reservation, bad)
        assert journal.flush()
        assert journal.rejected == 1
        [rejected] = [orjson.loads(line) for line in lines(folder / REJECTED)]
        with pytest.raises((KeyError, ValueError)) as refused:
            priced.ledger.general_row(bad[0], priced.clock())
        assert rejected["error"] == f"{refused.type.__name__}: {refused.value}"
        assert [e.event.event_id for e in priced.ledger.entries()] == [e.event_id for e in good[1]]
    finally:
        journal.close()


def test_a_database_outage_keeps_every_record(priced: Metering, folder: Path) -> None:
    down = create_database(UNREACHABLE)
    journal = UsageJournal(folder, Reservations(down, Outbox(down)))
    calls = [settlement(priced, n) for n in range(3)]
    path = journal.path
    try:
        for held, events in calls:
            journal.append(held, events)
        assert journal.flush() is False
        assert journal.pending == 3 and journal.rejected == 0
        assert len(lines(path)) == 3
        assert not (folder / REJECTED).exists()
    finally:
        journal.close()  # cannot apply: leaves the file, unlocked, for recovery
        down.dispose()
    assert len(lines(path)) == 3
    # Another writer (the next process) recovers it once the database is back.
    recovering = UsageJournal(folder, priced.reservations)
    try:
        assert recovering.flush()
        assert recovering.recovered == 1
    finally:
        recovering.close()
    assert os.listdir(folder) == []
    assert balance(priced) == (97 * PRICE, 0)
    expected = sorted(e.event_id for _, events in calls for e in events)
    assert ledger_ids(priced) == expected


@pytest.mark.slow
def test_a_dead_writers_journal_is_recovered_and_deleted(priced: Metering, folder: Path) -> None:
    calls = [settlement(priced, n) for n in range(2)]
    # A writer in another process appends and dies without closing its journal.
    script = textwrap.dedent(
        """
        import os, pickle, sys
        from pathlib import Path
        from modelport.metering.journal import UsageJournal
        calls = pickle.loads(sys.stdin.buffer.read())
        journal = UsageJournal(Path(sys.argv[1]), None)
        for reservation, events in calls:
            journal.append(reservation, events)
        print(journal.path, flush=True)
        os._exit(0)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(folder)],
        input=pickle.dumps(calls),
        capture_output=True,
        check=True,
        timeout=60,
    )
    path = Path(done.stdout.decode().strip())
    assert len(lines(path)) == 2
    with path.open("ab") as raw:
        raw.write(b'{"not": "a settlement"}\n')  # a line that is no settlement at all
        raw.write(b'{"r":null,"e":[{"event_id":"torn')  # a last write torn by the crash
    assert balance(priced) == (100 * PRICE, 2 * PRICE)  # nothing applied yet
    journal = UsageJournal(folder, priced.reservations)
    try:
        journal.start()  # recovery runs first thing
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if not path.exists():
                break
            asyncio.run(asyncio.sleep(0.01))
        assert not path.exists()
        assert journal.recovered == 1
    finally:
        journal.close()
    assert balance(priced) == (98 * PRICE, 0)
    assert ledger_ids(priced) == sorted(e.event_id for _, events in calls for e in events)
    # The line that is no settlement is set aside; the torn one is no record at all.
    [rejected] = [orjson.loads(line) for line in lines(folder / REJECTED)]
    assert rejected["line"] == '{"not": "a settlement"}'
    assert journal.rejected == 1


def test_a_live_writers_journal_is_not_touched(priced: Metering, folder: Path) -> None:
    live = UsageJournal(folder, priced.reservations)
    other = UsageJournal(folder, priced.reservations)
    try:
        live.append(*settlement(priced))
        before = live.path.read_bytes()
        assert other.flush()
        assert other.recovered == 0
        assert live.path.read_bytes() == before
        assert balance(priced) == (100 * PRICE, PRICE)
        assert live.flush()
        assert balance(priced) == (99 * PRICE, 0)
    finally:
        live.close()
        other.close()
    assert os.listdir(folder) == []
