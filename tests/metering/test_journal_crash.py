"""A ``modelport serve`` killed (SIGKILL) right after answering a priced call loses no
usage and bills nothing twice: the settlement was in its usage journal, and the next
process on the same home applies it."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from modelport.metering.balances import BalanceRepository
from modelport.metering.ledger import Ledger
from modelport.metering.types import BalanceScope, ReservationState
from modelport.store import Database
from modelport.store.tables import ReservationRow
from tests.conftest import free_port
from tests.metering.conftest import ADDER_BODY, make_platform
from tests.serve_process import serve, wait_for, wait_healthy

pytestmark = pytest.mark.slow  # starts real processes

TENANT = BalanceScope.TENANT
PRICE = 2_500


def test_a_settlement_survives_kill_9_and_is_charged_once(
    tmp_path: Path, database_url: str, database: Database
) -> None:
    home = tmp_path / "home"
    platform = make_platform(home, database_url)
    platform.services.metering.balances.credit(TENANT, "beta", 10_000, tenant="beta")
    platform.price(PRICE)
    key = platform.key
    platform.close_client()
    platform.services.close()
    balances, ledger = BalanceRepository(database), Ledger(database)
    journals = home / "journal"

    settings = {
        "MODELPORT_DATABASE_URL": database_url,
        "MODELPORT_METERING_DURABILITY": "journal",  # PostgreSQL too: this is its test
    }
    # The first process answers, then dies before its applier runs (it would only
    # after an hour): the settlement exists only in its journal.
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    first = serve(home, port, **settings, MODELPORT_METERING_JOURNAL_INTERVAL_SECONDS="3600")
    try:
        wait_healthy(url, first)
        answer = httpx.post(
            f"{url}/v2/models/acme/adder/infer",
            json=ADDER_BODY,
            headers={"Authorization": f"Bearer {key}", "X-Request-Id": "crash-1"},
            timeout=60,
        )
    finally:
        first.kill()  # SIGKILL, at once
        first.wait(timeout=30)
    assert answer.status_code == 200, answer.text
    held = balances.get(TENANT, "beta")
    assert (held.balance_micros, held.reserved_micros) == (10_000, PRICE)
    assert ledger.entries() == []
    [journal] = journals.glob("*.journal")
    assert journal.read_bytes().count(b"\n") == 1

    # The next process on the same home applies the dead process's journal.
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    second = serve(home, port, **settings)
    try:
        wait_healthy(url, second)
        wait_for(lambda: not journal.exists())
        wait_for(lambda: bool(ledger.entries()))
        time.sleep(0.5)  # a second copy, were there one, would arrive by now
        entries = ledger.entries()
    finally:
        second.terminate()
        second.wait(timeout=30)
    [entry] = entries
    assert entry.event.request_id == "crash-1" and entry.event.amount_micros == PRICE
    after = balances.get(TENANT, "beta")
    assert (after.balance_micros, after.reserved_micros) == (10_000 - PRICE, 0)
    with database.transaction() as session:
        row = session.get(ReservationRow, entry.event.reservation_id)
        assert row is not None and row.state == ReservationState.SETTLED.value
        assert row.settled_micros == PRICE
