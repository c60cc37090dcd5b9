"""An endpoint's SLOs: set at creation or replaced, checked with ``invalid_slo``, turned
into a Prometheus rule file that promtool accepts, and fed by the endpoint's calls
(``modelport_endpoint_requests_total``: ok, error, rejected; the latency of the ok ones)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from modelport.observability.metrics import render
from tests.conftest import skip_or_fail
from tests.serving.conftest import Serving, failing

AVAILABILITY = {"name": "availability", "kind": "availability", "objective": 0.999}
P99 = {"name": "p99", "kind": "latency", "objective": 0.99, "threshold_ms": 250}
JOBS = {"name": "jobs", "kind": "completion", "objective": 0.95, "threshold_ms": 3_600_000}


def samples(serving: Serving, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    text = render(serving.services.metrics.registry).decode()
    return {
        tuple(sorted(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name
    }


def test_slos_are_part_of_the_endpoint_and_can_be_replaced(serving: Serving) -> None:
    created = serving.endpoint("fraud", slos=[AVAILABILITY, P99])
    assert [s["name"] for s in created["slos"]] == ["availability", "p99"]
    assert created["slos"][1]["threshold_ms"] == 250 and created["slos"][1]["window_days"] == 30
    shown = serving.client.get("/api/endpoints/fraud/slos").json()
    assert shown["items"] == created["slos"]
    replaced = serving.client.put("/api/endpoints/fraud/slos", json={"slos": [JOBS]})
    assert replaced.status_code == 200, replaced.text
    assert [s["name"] for s in replaced.json()["items"]] == ["jobs"]
    assert [s["kind"] for s in serving.client.get("/api/endpoints/fraud").json()["slos"]] == [
        "completion"
    ]
    assert serving.client.put("/api/endpoints/fraud/slos", json={"slos": []}).json()["items"] == []
    missing = serving.client.put("/api/endpoints/nobody/slos", json={"slos": [AVAILABILITY]})
    assert missing.status_code == 404


@pytest.mark.parametrize(
    ("slo", "field"),
    [
        ({**P99, "threshold_ms": 240}, "slos.0.threshold_ms"),  # not a bucket bound
        ({**P99, "threshold_ms": None}, "slos.0.threshold_ms"),
        ({**JOBS, "threshold_ms": 250}, "slos.0.threshold_ms"),  # a latency bound, not a job's
        ({**AVAILABILITY, "threshold_ms": 250}, "slos.0.threshold_ms"),
        ({**AVAILABILITY, "objective": 1.0}, "slos.0.objective"),
        ({**AVAILABILITY, "objective": 0.2}, "slos.0.objective"),
        ({**AVAILABILITY, "window_days": 0}, "slos.0.window_days"),
        ({**AVAILABILITY, "name": "Bad Name"}, "slos.0.name"),
    ],
)
def test_a_bad_slo_is_refused_naming_its_field(
    serving: Serving, slo: dict[str, Any], field: str
) -> None:
    serving.endpoint("fraud")
    answer = serving.client.put("/api/endpoints/fraud/slos", json={"slos": [slo]})
    assert answer.status_code == 400, answer.text
    assert answer.json()["code"] == "invalid_slo"
    assert answer.json()["field"] == field
    serving.ensure_tenant("acme")
    created = serving.client.post(
        "/api/endpoints", json={"name": "other", "tenant": "acme", "slos": [slo]}
    )
    assert created.status_code == 400 and created.json()["code"] == "invalid_slo"
    assert serving.client.get("/api/endpoints/other").status_code == 404


def test_two_slos_of_one_name_are_refused(serving: Serving) -> None:
    serving.endpoint("fraud")
    answer = serving.client.put(
        "/api/endpoints/fraud/slos", json={"slos": [AVAILABILITY, {**P99, "name": "availability"}]}
    )
    assert answer.json()["code"] == "invalid_slo" and answer.json()["field"] == "slos.1.name"


@pytest.mark.slow  # runs promtool
def test_the_rule_file_covers_every_slo_and_promtool_accepts_it(
    serving: Serving, tmp_path: Path
) -> None:
    serving.endpoint("fraud", slos=[AVAILABILITY, P99])
    serving.endpoint("nightly", slos=[JOBS], priority="batch")
    serving.endpoint("plain")
    answer = serving.client.get("/api/slos/rules")
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("application/yaml")
    text = answer.text
    for group in ("modelport-slo-fraud-availability", "modelport-slo-fraud-p99"):
        assert f'name: "{group}"' in text
    assert "modelport-slo-nightly-jobs" in text and "plain" not in text
    assert 'le=\\"0.25\\"' in text and 'le=\\"3600.0\\"' in text
    assert serving.client.get("/api/slos/rules", headers={"Authorization": ""}).status_code == 401
    promtool = shutil.which("promtool")
    if promtool is None:
        skip_or_fail("promtool is not installed (Debian: apt-get install prometheus)")
    assert promtool is not None
    path = tmp_path / "slos.yml"
    path.write_text(text)
    checked = subprocess.run(
        [promtool, "check", "rules", str(path)], capture_output=True, text=True, timeout=60
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 63 rules found" in checked.stdout


def test_calls_are_counted_by_outcome_for_the_slos(serving: Serving) -> None:
    good = serving.publish("acme/fraud", "1")
    bad = serving.publish("acme/broken", "1", failing())
    serving.endpoint("fraud")
    serving.endpoint("broken")
    serving.deploy("fraud", [(good, 100)])
    serving.deploy("broken", [(bad, 100)])
    assert serving.predict("fraud").status_code == 200
    assert serving.predict("fraud").status_code == 200
    assert serving.predict("fraud", {"inputs": {"z": [[1, 2, 3, 4]]}}).status_code == 400
    assert serving.predict("broken").status_code >= 500
    counts = samples(serving, "modelport_endpoint_requests_total")
    assert counts[(("endpoint", "fraud"), ("outcome", "ok"))] == 2
    assert counts[(("endpoint", "fraud"), ("outcome", "rejected"))] == 1
    assert counts[(("endpoint", "broken"), ("outcome", "error"))] == 1
    assert (("endpoint", "broken"), ("outcome", "ok")) not in counts
    latency = samples(serving, "modelport_endpoint_request_duration_seconds_count")
    assert latency == {(("endpoint", "fraud"),): 2}
