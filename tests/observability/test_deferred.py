"""Per-call observations kept aside (``Deferred``) reach their series before any read of
the registry, by the recording loop's timer, or at once off any loop; nothing is lost or
applied twice."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import CollectorRegistry

from modelport.observability import deferred
from modelport.observability.slo_metrics import SLIMetrics


def calls(registry: CollectorRegistry, outcome: str) -> float | None:
    return registry.get_sample_value(
        "modelport_endpoint_requests_total", {"endpoint": "fraud", "outcome": outcome}
    )


def test_a_recording_off_any_loop_is_applied_at_once() -> None:
    slis = SLIMetrics()
    slis.endpoint_call("fraud", "ok", 0.01)
    assert slis._deferred._pending == []
    assert calls(slis.registry, "ok") == 1


def test_a_read_of_the_registry_applies_what_is_pending() -> None:
    async def run() -> SLIMetrics:
        slis = SLIMetrics()
        for outcome in ("ok", "ok", "error", "rejected"):
            slis.endpoint_call("fraud", outcome, 0.01)
        assert len(slis._deferred._pending) == 4  # a timer is set, nothing applied yet
        assert calls(slis.registry, "ok") == 2  # the read applied them
        assert calls(slis.registry, "error") == 1
        count = slis.registry.get_sample_value(
            "modelport_endpoint_request_duration_seconds_count", {"endpoint": "fraud"}
        )
        assert count == 2  # only ok calls are timed
        return slis

    slis = asyncio.run(run())
    assert calls(slis.registry, "ok") == 2  # not applied twice


def test_the_loop_timer_applies_them_without_a_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(deferred, "FOLD_INTERVAL", 0.0)

    async def run() -> SLIMetrics:
        slis = SLIMetrics()
        slis.endpoint_call("fraud", "ok", 0.01)
        assert slis._deferred._pending
        for _ in range(3):
            await asyncio.sleep(0)  # let the timer (due now) run
        assert slis._deferred._pending == []
        slis.endpoint_call("fraud", "ok", 0.01)  # a new timer for the next ones
        for _ in range(3):
            await asyncio.sleep(0)
        assert slis._deferred._pending == []
        return slis

    assert calls(asyncio.run(run()).registry, "ok") == 2


def test_a_timer_whose_loop_stopped_is_replaced() -> None:
    async def record(slis: SLIMetrics) -> None:
        slis.endpoint_call("fraud", "ok", 0.01)

    slis = SLIMetrics()
    asyncio.run(record(slis))  # its timer died with its loop
    assert slis._deferred._pending
    slis._deferred._armed_at -= 10 * deferred.FOLD_INTERVAL
    slis.endpoint_call("fraud", "error", 0.01)  # off any loop: applied at once
    assert slis._deferred._pending == []
    assert calls(slis.registry, "ok") == 1 and calls(slis.registry, "error") == 1
