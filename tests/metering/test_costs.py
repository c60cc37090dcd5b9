"""Cost per call: each call's share of its executed batch's time adds up to the compute
the runtime measured over the run; priced per core-second, it is the cost that
``/api/costs`` and the metrics show beside the revenue and the margin."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from modelport.metering.types import BalanceScope
from modelport.observability.metrics import render
from tests.metering.conftest import Platform, make_platform

CORE_SECOND = 2000.0  # micros
PRICE = 100  # micros per prediction


@pytest.fixture
def platform(tmp_path: Path, database_url: str) -> Platform:
    built = make_platform(tmp_path / "home", database_url, cost_per_core_second_micros=CORE_SECOND)
    yield built  # type: ignore[misc]
    built.close_client()
    built.services.close()


def values(platform: Platform) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = render(platform.services.metrics.registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def body(rows: int) -> dict[str, object]:
    data = [float(i) for i in range(4 * rows)]
    return {"inputs": [{"name": "x", "datatype": "FP32", "shape": [rows, 4], "data": data}]}


def test_the_costs_of_calls_add_up_to_the_measured_compute(platform: Platform) -> None:
    services = platform.services
    services.metering.balances.credit(BalanceScope.TENANT, "beta", 10**9, tenant="beta")
    platform.price(PRICE)
    calls = [1, 3, 2, 8, 1]
    for rows in calls:
        assert platform.infer(json=body(rows)).status_code == 200
    # Concurrent calls may share a batch: each takes its rows' share of its time.
    answers: list[int] = []
    threads = [
        threading.Thread(
            target=lambda r=r: answers.append(platform.infer(json=body(r)).status_code)
        )
        for r in (1, 2, 3, 4, 5, 6)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert answers == [200] * 6
    assert platform.infer(json={"inputs": []}).status_code == 400  # refused: costs nothing
    n = len(calls) + len(threads)
    if services.metering.journal is not None:
        assert services.metering.journal.flush()
    platform.entries()

    seen = values(platform)
    model = (("model", "acme/adder"), ("version", "1"))
    executed = seen[("modelport_inference_execution_duration_seconds_sum", model)]
    assert executed > 0
    who = (("model", "acme/adder"), ("tenant", "beta"))
    cpu = seen[("modelport_compute_seconds_total", (("device", "cpu"), *who))]
    assert cpu == pytest.approx(executed, rel=1e-9)
    assert seen[("modelport_compute_cost_micros_total", who)] == pytest.approx(
        executed * CORE_SECOND, rel=1e-9
    )
    assert seen[("modelport_revenue_micros_total", who)] == n * PRICE
    assert seen[("modelport_compute_price_micros", (("device", "cpu"),))] == CORE_SECOND

    report = platform.client.get("/api/costs").json()
    assert report["prices"] == {"core_second_micros": CORE_SECOND, "gpu_second_micros": 0.0}
    [line] = report["items"]
    assert (line["tenant"], line["model"], line["calls"]) == ("beta", "acme/adder", n)
    assert line["compute_ms"] == pytest.approx(executed * 1000, abs=1e-2)
    assert line["cost_micros"] == pytest.approx(executed * CORE_SECOND, abs=1e-2)
    assert line["revenue_micros"] == n * PRICE
    assert line["margin_micros"] == pytest.approx(n * PRICE - executed * CORE_SECOND, abs=1e-2)
    assert line["cost_per_call_micros"] == pytest.approx(line["cost_micros"] / n, abs=1e-2)
    assert report["tenants"] == [
        {
            "tenant": "beta",
            "compute_ms": line["compute_ms"],
            "cost_micros": line["cost_micros"],
            "share": 1.0,
        }
    ]
    [by_model] = report["models"]
    assert by_model["margin_micros"] == line["margin_micros"]
    period = report["period"]
    assert platform.client.get("/api/costs", params={"period": period}).json() == report
    assert platform.client.get("/api/costs", params={"tenant": "acme"}).json()["items"] == []
    assert platform.client.get("/api/costs", params={"period": "1999-01"}).json()["items"] == []


def test_costs_are_the_operators_and_a_bad_period_is_refused(platform: Platform) -> None:
    bad = platform.client.get("/api/costs", params={"period": "soon"})
    assert bad.status_code == 400 and bad.json()["code"] == "invalid_period"
    as_beta = {"Authorization": f"Bearer {platform.key}"}
    assert platform.client.get("/api/costs", headers=as_beta).status_code == 403
