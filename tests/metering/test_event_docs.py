"""The journal's request-path encoding of a call's usage events equals the documents
of the events themselves (``event_to_doc``), for every way a call can end."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest

from modelport.metering import meter
from modelport.metering.events import event_from_doc, event_to_doc
from modelport.metering.meter import MeteredCall
from modelport.metering.types import (
    CallInfo,
    FailureRule,
    PriceSnapshot,
    Reservation,
    ReservationState,
    Unit,
    UsageStatus,
)

STARTED = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
NOW = 1_000.0
"""The meter's monotonic clock, frozen: both encodings read the same wall time."""
PRICES = {
    Unit.PREDICTION: PriceSnapshot(7, 2_500, revenue_share_bps=7_000),
    Unit.COMPUTE_MS: PriceSnapshot(8, 30, per_units=10, failure_rule=FailureRule.FULL),
    Unit.SECOND: PriceSnapshot(
        9, 1_000, failure_rule=FailureRule.FRACTION, failure_bps=2_500, revenue_share_bps=5_000
    ),
}


def _call(*, reserved: bool, ran: bool) -> MeteredCall:
    info = CallInfo(
        tenant="beta",
        key_id="k1",
        model="acme/mlp",
        version="2",
        manifest_digest="sha256:" + "a" * 64,
        endpoint="prod" if ran else None,
        request_id="req-1",
        timeout_seconds=2.5,
    )
    reservation = (
        Reservation(
            id="r" * 32,
            tenant="beta",
            key_id="k1",
            amount_micros=10_000,
            levels=("balance:tenant:beta",),
            state=ReservationState.HELD,
            created_at=STARTED,
            expires_at=STARTED + timedelta(seconds=60),
        )
        if reserved
        else None
    )
    call = MeteredCall(info, PRICES, reservation, STARTED, NOW - 1.25)
    call.record(compute_seconds=0.0123)
    if ran:
        call.ran_version("acme/mlp", "1", "sha256:" + "b" * 64)
    return call


@pytest.mark.parametrize("status", list(UsageStatus))
@pytest.mark.parametrize("prices", [PRICES, {}], ids=["priced", "free"])
@pytest.mark.parametrize("reserved", [True, False])
@pytest.mark.parametrize("ran", [False, True])
def test_event_docs_are_the_documents_of_the_events(
    status, prices, reserved, ran, monkeypatch
) -> None:
    monkeypatch.setattr(meter, "time", SimpleNamespace(monotonic=lambda: NOW))
    call = _call(reserved=reserved, ran=ran)
    finished = STARTED + timedelta(seconds=1.25)
    docs = call.event_docs(status, prices, finished)
    events = call.events(status, prices, finished)
    expected = [event_to_doc(e) for e in events]
    assert all(doc["wall_ms"] == pytest.approx(1250.0) for doc in docs)
    assert docs == expected
    assert [event_to_doc(event_from_doc({**d, "wall_ms": 0.0})) for d in docs] == [
        {**d, "wall_ms": 0.0} for d in docs
    ]
