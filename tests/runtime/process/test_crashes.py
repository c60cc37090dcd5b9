"""The crash ledger on a manual clock: counts in a window, quarantine and its end."""

from __future__ import annotations

import pytest

from modelport.clock import ManualClock
from modelport.errors import Unavailable
from modelport.runtime.process.crashes import CrashLedger


def test_crashes_within_the_window_quarantine_until_the_oldest_ages_out() -> None:
    clock = ManualClock()
    ledger = CrashLedger(limit=3, window=10.0, clock=clock)
    assert not ledger.record("acme/m:1")
    clock.advance(4.0)
    assert not ledger.record("acme/m:1")
    ledger.check("acme/m:1")  # two crashes: not yet
    clock.advance(4.0)
    assert ledger.record("acme/m:1")  # the third within 10 s
    assert ledger.crashes("acme/m:1") == 3
    assert ledger.quarantined_for("acme/m:1") == pytest.approx(2.0)
    with pytest.raises(Unavailable) as raised:
        ledger.check("acme/m:1")
    assert raised.value.code == "version_quarantined"
    assert raised.value.extra["retry_after"] == pytest.approx(2.0)
    clock.advance(2.0)  # the first crash leaves the window
    ledger.check("acme/m:1")
    assert ledger.crashes("acme/m:1") == 2


def test_crashes_spread_wider_than_the_window_never_quarantine() -> None:
    clock = ManualClock()
    ledger = CrashLedger(limit=2, window=5.0, clock=clock)
    for _ in range(5):
        assert not ledger.record("acme/m:1")
        clock.advance(5.0)
    assert ledger.quarantined_for("acme/m:1") == 0.0


def test_versions_are_counted_apart() -> None:
    ledger = CrashLedger(limit=1, window=5.0, clock=ManualClock())
    assert ledger.record("acme/a:1")
    ledger.check("acme/b:1")
    assert ledger.crashes("acme/b:1") == 0


@pytest.mark.parametrize(("limit", "window"), [(0, 1.0), (1, 0.0)])
def test_a_meaningless_ledger_is_refused(limit: int, window: float) -> None:
    with pytest.raises(ValueError):
        CrashLedger(limit=limit, window=window, clock=ManualClock())
