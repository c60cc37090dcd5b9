"""Inference results carry usage quantities in the platform's units, and the meter
prices and settles from them (not from a row count the surface computes)."""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from modelport.metering.meter import MeteredCall
from modelport.metering.types import BalanceScope, CallInfo, Unit, Usage, UsageStatus
from modelport.store.base import utcnow
from tests.metering.conftest import Platform


def test_the_meter_settles_the_quantities_of_a_usage() -> None:
    call = MeteredCall(
        CallInfo("beta", None, "acme/adder", "1", "sha256:x", timeout_seconds=10),
        {},
        None,
        utcnow(),
        time.monotonic(),
    )
    call.record_usage(
        Usage(rows=3, input_tokens=7, output_tokens=11, images=2, cpu_ms=2.5, gpu_ms=1)
    )
    done = UsageStatus.SUCCEEDED
    assert call.quantity(Unit.COMPUTE_MS, done, 100.0) == 4  # cpu and gpu, rounded up
    assert call.quantity(Unit.INPUT_TOKEN, done, 100.0) == 7
    assert call.quantity(Unit.OUTPUT_TOKEN, done, 100.0) == 11
    assert call.quantity(Unit.IMAGE, done, 100.0) == 2


def test_a_v2_call_is_settled_from_the_usage_its_result_carries(
    platform: Platform, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    metering = platform.services.metering
    metering.balances.credit(BalanceScope.TENANT, "beta", 10_000_000, tenant="beta")
    platform.price(1, unit="compute_ms")
    recorded: list[Usage] = []
    record_usage = MeteredCall.record_usage

    def spy(self: MeteredCall, usage: Usage) -> None:
        recorded.append(usage)
        record_usage(self, usage)

    monkeypatch.setattr(MeteredCall, "record_usage", spy)
    x = np.zeros((3, 4), np.float32)
    body: dict[str, Any] = {
        "inputs": [{"name": "x", "datatype": "FP32", "shape": [3, 4], "data": x.ravel().tolist()}]
    }
    response = platform.infer(json=body)
    assert response.status_code == 200, response.text
    [usage] = recorded
    assert usage.rows == 3 and usage.cpu_ms > 0 and usage.seconds > 0
    if metering.journal is not None:
        assert metering.journal.flush()
    [entry] = [e for e in platform.entries() if e.event.unit is Unit.COMPUTE_MS]
    assert entry.event.quantity == math.ceil(usage.cpu_ms)
