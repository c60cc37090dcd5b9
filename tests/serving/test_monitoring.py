"""Endpoints' drift and quality monitors over the real prediction log (SQLite and
PostgreSQL): drift found on a deliberately shifted stream and not on an unshifted one,
accuracy by slice from joined outcomes, the validation data as the reference, the
policy's API and its refusals, the metrics, and a canary halted by its monitor."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import numpy as np
import pytest

from modelport.monitoring.service import MonitoringService
from modelport.observability.prediction_store import PredictionRepository
from modelport.observability.predictions import detail_fields
from modelport.observability.types import LogPolicy, PredictionRecord
from tests.serving.conftest import Serving, add_constant
from tests.serving.test_canary import start_canary

LOGGED = LogPolicy(inputs=True, outputs=True)


def write(
    serving: Serving,
    n: int,
    *,
    version: str,
    hours_ago: float,
    shift: float = 0.0,
    seed: int,
    prefix: str,
    **fields: Any,
) -> list[str]:
    """``n`` answered predictions of ``acme/fraud:version`` with 2 features (the second
    moved by ``shift``), logged ``hours_ago`` before the services' clock."""
    rng = np.random.default_rng(seed)
    at = serving.clock.now() - timedelta(hours=hours_ago)
    records = []
    for i in range(n):
        x = np.array([[rng.normal(0, 1), rng.normal(shift, 1)]], dtype=np.float32)
        y = x.sum(axis=1)
        base = {
            "id": f"{prefix}{i:05d}",
            "endpoint": "fraud",
            "owner": "acme",
            "model": "acme/fraud",
            "version": version,
            "backend": "local",
            "received_at": at + timedelta(seconds=i),
            "latency_seconds": 0.002,
            "tenant": "acme",
            "arm": "stable",
            "answer_value": float(y[0]),
        }
        records.append(
            PredictionRecord(**(base | detail_fields(LOGGED, {"x": x}, {"y": y}) | fields))
        )
    PredictionRepository(serving.services.database).insert(records)
    return [r.id for r in records]


def monitoring(serving: Serving) -> MonitoringService:
    return serving.services.monitoring


def by_version(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {v["version"]: v for v in report["versions"]}


def test_a_shifted_stream_drifts_and_an_unshifted_one_does_not(serving_db: Serving) -> None:
    serving = serving_db
    serving.endpoint("fraud")
    write(serving, 300, version="1", hours_ago=48, seed=1, prefix="r")  # the reference window
    write(serving, 120, version="1", hours_ago=2, seed=2, prefix="a")
    write(serving, 120, version="2", hours_ago=2, seed=3, prefix="b", shift=1.5, arm="canary")
    report = serving.client.get("/api/endpoints/fraud/monitoring")
    assert report.status_code == 200, report.text
    body = report.json()
    assert body["reference"] == "window" and len(body["reference_window"]) == 2
    versions = by_version(body)
    steady, moved = versions["1"], versions["2"]
    assert (steady["predictions"], moved["predictions"]) == (120, 120)
    assert steady["in_breach"] is False
    assert {d["feature"]: d["drifted"] for d in steady["inputs"]} == {"x[0]": False, "x[1]": False}
    moved_inputs = {d["feature"]: d for d in moved["inputs"]}
    assert moved_inputs["x[1]"]["drifted"] and moved_inputs["x[1]"]["psi"] > 0.2
    assert not moved_inputs["x[0]"]["drifted"]
    assert moved["arm"] == "canary" and moved["in_breach"]
    assert any(b.startswith("input x[1] drifted") for b in moved["breaches"])
    # The answer follows the shifted feature: the output drifted too.
    assert {d["feature"]: d["drifted"] for d in moved["outputs"]}["answer_value"] is True

    serving.client.put("/api/endpoints/fraud/monitor", json={"window_hours": 12})
    [checked] = monitoring(serving).check()
    assert checked.endpoint == "fraud"
    metrics = serving.client.get("/metrics").text
    assert (
        'modelport_monitoring_breach{arm="canary",endpoint="fraud",model="acme/fraud",version="2"} 1.0'
        in metrics
    )
    assert (
        'modelport_monitoring_breach{arm="stable",endpoint="fraud",model="acme/fraud",version="1"} 0.0'
        in metrics
    )
    assert 'feature="x[1]"' in metrics
    assert monitoring(serving).check() == []  # not due again before its interval


def test_accuracy_by_slice_from_joined_outcomes(serving_db: Serving) -> None:
    serving = serving_db
    serving.endpoint("fraud")
    rng = np.random.default_rng(5)
    expected: dict[str, list[bool]] = {"acme": [], "globex": []}
    for tenant, right in (("acme", 0.9), ("globex", 0.5)):
        ids = write(
            serving, 40, version="1", hours_ago=1, seed=9, prefix=f"{tenant}-",
            tenant=tenant, answer_label="1",
        )  # fmt: skip
        for prediction in ids:
            truth = "1" if rng.random() < right else "0"
            expected[tenant].append(truth == "1")
            posted = serving.client.post(
                f"/api/predictions/{prediction}/outcome", json={"label": truth}
            )
            assert posted.status_code == 201, posted.text
    put = serving.client.put(
        "/api/endpoints/fraud/monitor",
        json={"slice_by": "tenant", "min_accuracy": 0.8, "min_samples": 20},
    )
    assert put.status_code == 200, put.text
    [version] = serving.client.get("/api/endpoints/fraud/monitoring").json()["versions"]
    quality = {q["slice"]: q for q in version["quality"]}
    every = expected["acme"] + expected["globex"]
    assert quality[None]["accuracy"] == pytest.approx(sum(every) / len(every))
    for tenant, hits in expected.items():
        assert quality[tenant]["labelled"] == 40
        assert quality[tenant]["accuracy"] == pytest.approx(sum(hits) / len(hits))
    overall = sum(every) / len(every)
    assert version["in_breach"] is (overall < 0.8)


def test_the_validation_data_can_be_the_reference(serving: Serving) -> None:
    rows = np.random.default_rng(4).normal(0, 1, (40, 2)).round(4).tolist()
    example = {
        "inputs": [
            {
                "name": "x",
                "datatype": "FP32",
                "shape": [40, 2],
                "data": [v for row in rows for v in row],
            }
        ]
    }
    serving.publish(
        "acme/fraud", "1",
        inputs=[{"name": "x", "datatype": "FP32", "shape": [-1, 2]}],
        outputs=[{"name": "y", "datatype": "FP32", "shape": [-1, 2]}],
        examples=[example],
    )  # fmt: skip
    serving.endpoint("fraud")
    write(serving, 60, version="1", hours_ago=1, seed=6, prefix="v", shift=3.0)
    policy = {"reference": "validation", "min_samples": 30}
    assert serving.client.put("/api/endpoints/fraud/monitor", json=policy).status_code == 200
    body = serving.client.get("/api/endpoints/fraud/monitoring").json()
    assert body["reference_window"] is None
    [version] = body["versions"]
    assert version["reference_predictions"] == 1  # one example tensor of 40 rows
    drifted = {d["feature"]: d["drifted"] for d in version["inputs"]}
    assert drifted == {"x[0]": False, "x[1]": True}


def test_the_policy_api_and_its_refusals(serving: Serving) -> None:
    serving.endpoint("fraud")
    client = serving.client
    default = client.get("/api/endpoints/fraud/monitor").json()
    assert default["configured"] is False and default["psi_limit"] == 0.2
    bad = client.put("/api/endpoints/fraud/monitor", json={"slice_by": "secret_field"})
    assert bad.status_code in (400, 422) and "slice_by" in bad.text
    unknown = client.put("/api/endpoints/fraud/monitor", json={"psi": 1})
    assert unknown.status_code in (400, 422)
    missing = client.put("/api/endpoints/nowhere/monitor", json={})
    assert missing.status_code == 404 and missing.json()["code"] == "endpoint_not_found"
    stored = client.put(
        "/api/endpoints/fraud/monitor", json={"slice_by": "feature:kind", "halt_canary": True}
    )
    assert stored.status_code == 200 and stored.json()["configured"] is True
    assert client.get("/api/endpoints/fraud/monitor").json()["slice_by"] == "feature:kind"
    assert client.delete("/api/endpoints/fraud/monitor").status_code == 204
    gone = client.delete("/api/endpoints/fraud/monitor")
    assert gone.status_code == 404 and gone.json()["code"] == "monitor_not_found"
    anonymous = serving.client.get("/api/endpoints/fraud/monitoring", headers={"Authorization": ""})
    assert anonymous.status_code == 401


def test_a_canary_whose_candidate_drifts_is_halted_by_its_monitor(serving: Serving) -> None:
    deployment = start_canary(serving, add_constant(1.0, "same"), max_p99_increase=100.0)
    assert (
        serving.client.put("/api/endpoints/fraud/monitor", json={"halt_canary": True}).status_code
        == 200
    )
    write(serving, 200, version="1", hours_ago=30, seed=1, prefix="r")
    write(serving, 60, version="1", hours_ago=1, seed=2, prefix="s")
    write(serving, 60, version="2", hours_ago=1, seed=3, prefix="c", shift=2.0, arm="canary")
    [report] = monitoring(serving).check()
    assert {v.version: v.in_breach for v in report.versions} == {"1": False, "2": True}
    halted = serving.wait("fraud", deployment["id"], lambda d: d["rollout"]["status"] == "halted")
    assert [v["weight"] for v in halted["versions"]] == [100, 0]
    assert halted["rollout"]["reason"].startswith("monitor: input x[1] drifted")
    assert {serving.predict("fraud").json()["model_version"] for _ in range(10)} == {"1"}
