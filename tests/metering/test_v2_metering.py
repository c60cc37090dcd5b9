"""The /v2 inference path metered end to end on a real ONNX model: reserve before the
work, settle after it, the usage event in the ledger with the manifest digest and the
price rule; 402 before any work when the balance does not cover the call."""

from __future__ import annotations

import asyncio

import httpx

from modelport.metering.types import BalanceScope, ReservationState, Unit, UsageStatus
from tests.metering.conftest import ADDER_BODY, Platform

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
