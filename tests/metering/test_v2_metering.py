"""The /v2 inference path metered end to end on a real ONNX model: reserve before the
work, settle after it, the usage event in the ledger with the manifest digest and the
price rule; 402 before any work when the balance does not cover the call; a price per
row held for every row asked and charged for the rows answered."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from modelport.metering.types import BalanceScope, ReservationState, Unit, UsageStatus
from tests.api_v2.test_too_large import binary_body
from tests.metering.conftest import ADDER_BODY, Platform, approve
from tests.serving.conftest import failing

TENANT = BalanceScope.TENANT


def test_an_inference_is_metered_with_its_artifact_and_price(platform: Platform) -> None:
    metering = platform.services.metering
    metering.balances.credit(TENANT, "beta", 10_000, tenant="beta")
    rule = platform.price(2_500, failure_rule="full")
    response = platform.infer(headers={"X-Request-Id": "req-42"})
    assert response.status_code == 200, response.text
    assert response.json()["outputs"][0]["data"] == [2, 3, 4, 5]
    # Durable before the response (in the usage journal on SQLite, committed on
    # PostgreSQL); once applied, the balance is debited.
    if metering.journal is not None:
        assert metering.journal.flush()
    balance = metering.balances.get(TENANT, "beta")
    assert balance.balance_micros == 7_500 and balance.reserved_micros == 0
    [entry] = platform.entries()
    event = entry.event
    digest = platform.services.registry.get_version("acme", "adder", "1").manifest_digest
    assert (event.tenant, event.model, event.version) == ("beta", "acme/adder", "1")
    assert event.manifest_digest == digest
    assert (event.price.rule_id, event.price.unit_price_micros) == (rule["id"], 2_500)
    assert event.price.failure_rule.value == "full"
    assert (event.unit, event.quantity, event.status) == (Unit.PREDICTION, 1, UsageStatus.SUCCEEDED)
    assert event.amount_micros == 2_500 and event.publisher_micros == 1_750
    assert event.publisher == "acme" and event.request_id == "req-42"
    assert event.key_id is not None and event.prediction_id
    assert event.compute_ms > 0 and event.wall_ms >= event.compute_ms
    reservation = metering.reservations.get(event.reservation_id or "")
    assert reservation is not None and reservation.state is ReservationState.SETTLED


def test_402_and_nothing_runs_when_the_balance_does_not_cover_the_call(
    platform: Platform,
) -> None:
    metering = platform.services.metering
    metering.balances.credit(TENANT, "beta", 2_000, tenant="beta")
    platform.price(2_500)
    refused = platform.infer()
    assert refused.status_code == 402
    assert "does not cover" in refused.json()["error"]
    assert refused.json()["code"] == "budget_exceeded"
    assert platform.entries() == []
    executions = platform.services.metrics.registry.get_sample_value(
        "modelport_inference_execution_duration_seconds_count",
        {"model": "acme/adder", "version": "1"},
    )
    assert not executions  # the model never executed
    assert metering.balances.get(TENANT, "beta").reserved_micros == 0


def test_a_free_version_is_recorded_without_a_reservation(platform: Platform) -> None:
    assert platform.infer().status_code == 200
    [entry] = platform.entries()
    assert entry.event.amount_micros == 0 and entry.event.price.rule_id is None
    assert entry.event.reservation_id is None


def test_invalid_requests_never_reach_the_backend_and_are_not_metered(
    platform: Platform,
) -> None:
    platform.services.metering.balances.credit(TENANT, "beta", 10_000, tenant="beta")
    platform.price(1_000)
    bad = platform.infer(
        json={"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 3], "data": [1, 2, 3]}]}
    )
    assert bad.status_code == 400
    assert platform.entries() == []
    assert platform.services.metering.balances.get(TENANT, "beta").balance_micros == 10_000


def test_200_concurrent_http_calls_against_a_balance_for_50(platform: Platform) -> None:
    metering = platform.services.metering
    metering.balances.credit(TENANT, "beta", 50 * 1_000, tenant="beta")
    platform.price(1_000)
    assert platform.infer(platform.key, json=ADDER_BODY).status_code == 200  # loads the model
    metering.balances.credit(TENANT, "beta", 1_000, tenant="beta")
    server = platform.live()

    async def storm() -> list[int]:
        headers = {"Authorization": f"Bearer {platform.key}"}
        limits = httpx.Limits(max_connections=200)
        async with httpx.AsyncClient(base_url=server.url, limits=limits, timeout=60) as client:

            async def call() -> int:
                response = await client.post(
                    "/v2/models/acme/adder/infer", json=ADDER_BODY, headers=headers
                )
                return response.status_code

            return list(await asyncio.gather(*(call() for _ in range(200))))

    try:
        statuses = asyncio.run(storm())
    finally:
        server.stop()
    assert statuses.count(200) == 50 and statuses.count(402) == 150
    balance = metering.balances.get(TENANT, "beta")
    assert balance.balance_micros == 0 and balance.reserved_micros == 0
    events = [e.event for e in platform.entries()]
    assert len(events) == 51 and sum(e.amount_micros for e in events) == 51_000


def _rows_body(n: int) -> dict[str, Any]:
    data = [float(i) for i in range(4 * n)]
    return {"inputs": [{"name": "x", "datatype": "FP32", "shape": [n, 4], "data": data}]}


def _executions(platform: Platform, version: str = "1") -> float:
    found = platform.services.metrics.registry.get_sample_value(
        "modelport_inference_execution_duration_seconds_count",
        {"model": "acme/adder", "version": version},
    )
    return found or 0.0


def test_a_call_of_n_rows_is_held_and_charged_n_times_the_row_price(platform: Platform) -> None:
    metering = platform.services.metering
    metering.balances.credit(TENANT, "beta", 10_000, tenant="beta")
    rule = platform.price(300, unit="row")
    json_call = platform.infer(json=_rows_body(5), headers={"X-Request-Id": "json"})
    assert json_call.status_code == 200, json_call.text
    assert len(json_call.json()["outputs"][0]["data"]) == 20
    body, headers = binary_body(3)  # the binary tensor extension
    binary_call = platform.client.post(
        "/v2/models/acme/adder/infer",
        content=body,
        headers={"Authorization": f"Bearer {platform.key}", "X-Request-Id": "binary", **headers},
    )
    assert binary_call.status_code == 200, binary_call.text
    if metering.journal is not None:
        assert metering.journal.flush()
    events = {e.event.request_id: e.event for e in platform.entries()}
    assert set(events) == {"json", "binary"}
    for request_id, rows in (("json", 5), ("binary", 3)):
        event = events[request_id]
        assert (event.unit, event.quantity, event.status) == (Unit.ROW, rows, UsageStatus.SUCCEEDED)
        assert (event.price.rule_id, event.amount_micros) == (rule["id"], rows * 300)
        held = metering.reservations.get(event.reservation_id or "")
        assert held is not None and held.amount_micros == rows * 300  # every row, up front
    balance = metering.balances.get(TENANT, "beta")
    assert balance.balance_micros == 10_000 - 8 * 300 and balance.reserved_micros == 0

    # 7,600 left: 26 rows (7,800) are refused before any work; 25 rows fit.
    ran = _executions(platform)
    refused = platform.infer(json=_rows_body(26))
    assert refused.status_code == 402, refused.text
    assert refused.json()["code"] == "budget_exceeded"
    assert _executions(platform) == ran  # the model never executed
    assert len(platform.entries()) == 2
    assert metering.balances.get(TENANT, "beta").reserved_micros == 0
    assert platform.infer(json=_rows_body(25)).status_code == 200


def test_a_failed_call_is_charged_its_rows_by_the_failure_rule(platform: Platform) -> None:
    metering = platform.services.metering
    metering.balances.credit(TENANT, "beta", 10_000, tenant="beta")
    platform.publisher.publish(
        "acme/adder",
        "2",
        failing(),
        inputs=[{"name": "x", "datatype": "FP32", "shape": [-1, 4]}],
        outputs=[{"name": "y", "datatype": "FP32", "shape": [-1, 4]}],
    )
    approve(platform.services, "acme", "adder", "2")
    platform.price(300, unit="row", version="2", failure_rule="fraction", failure_bps=5_000)
    failed = platform.infer(model="acme/adder/versions/2", json=_rows_body(4))
    assert failed.status_code == 500, failed.text
    if metering.journal is not None:
        assert metering.journal.flush()
    [entry] = platform.entries()
    event = entry.event
    assert (event.unit, event.quantity, event.status) == (Unit.ROW, 4, UsageStatus.FAILED)
    assert event.amount_micros == 600  # half of the 4 rows asked
    balance = metering.balances.get(TENANT, "beta")
    assert balance.balance_micros == 10_000 - 600 and balance.reserved_micros == 0
