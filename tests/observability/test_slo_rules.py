"""The SLO rules on synthetic series, run by ``promtool test rules``: a burning endpoint
pages through the fast window pair (1h/5m at 14.4) and nothing else yet, a steady one
is quiet, and the burn rates and budgets recorded are the ratios over the budget."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from modelport.observability.slo import SLO, SLOKind, check_slos
from modelport.observability.slo_rules import (
    ALERT,
    endpoint_objective,
    endpoint_rules,
    group,
    render,
)
from tests.conftest import skip_or_fail

SLOS = check_slos(
    [
        SLO(name="availability", kind=SLOKind.AVAILABILITY, objective=0.999),
        SLO(name="p99", kind=SLOKind.LATENCY, objective=0.99, threshold_ms=250),
        SLO(name="jobs", kind=SLOKind.COMPLETION, objective=0.95, threshold_ms=3_600_000),
    ]
)
REQUESTS = "modelport_endpoint_requests_total"
LATENCY = "modelport_endpoint_request_duration_seconds"
JOBS = "modelport_job_duration_seconds"


def series(endpoint: str, *, errors: int, slow: int, failed_jobs: int) -> list[dict[str, str]]:
    """Per minute: 90 ok calls and ``errors`` failed ones, ``slow`` of the ok ones over
    250 ms; 20 jobs, ``failed_jobs`` of them failed (the rest within the hour). 10 errors
    burn 100x a 0.1% budget, 45 slow 50x a 1% one, 19 failed jobs 19x a 5% one: each
    above 14.4, the fast page's rate."""
    where = f'endpoint="{endpoint}"'
    return [
        {"series": f'{REQUESTS}{{{where},outcome="ok"}}', "values": "0+90x120"},
        {"series": f'{REQUESTS}{{{where},outcome="error"}}', "values": f"0+{errors}x120"},
        {"series": f'{REQUESTS}{{{where},outcome="rejected"}}', "values": "0+500x120"},
        {"series": f'{LATENCY}_bucket{{{where},le="0.25"}}', "values": f"0+{90 - slow}x120"},
        {"series": f"{LATENCY}_count{{{where}}}", "values": "0+90x120"},
        {
            "series": f'{JOBS}_bucket{{{where},state="succeeded",le="3600.0"}}',
            "values": f"0+{20 - failed_jobs}x120",
        },
        {
            "series": f'{JOBS}_count{{{where},state="succeeded"}}',
            "values": f"0+{20 - failed_jobs}x120",
        },
        {"series": f'{JOBS}_count{{{where},state="failed"}}', "values": f"0+{failed_jobs}x120"},
    ]


def paged(rules: dict[str, Any], endpoint: str, slo: str) -> dict[str, Any]:
    """The 1h/5m page alert of ``endpoint``'s ``slo`` as promtool should see it firing."""
    found = next(
        r
        for g in rules["groups"]
        for r in g["rules"]
        if r.get("alert")
        and r["labels"]["slo"] == slo
        and r["labels"]["endpoint"] == endpoint
        and r["labels"]["long_window"] == "1h"
    )
    return {"exp_labels": found["labels"], "exp_annotations": found["annotations"]}


def test_the_rules_are_grouped_per_slo_with_the_workbook_windows() -> None:
    rules = group(endpoint_objective("fraud", SLOS[0]))
    alerts = [r for r in rules["rules"] if "alert" in r]
    windows = [(a["labels"]["severity"], a["labels"]["long_window"], a["for"]) for a in alerts]
    assert windows == [
        ("page", "1h", "2m"),
        ("page", "6h", "15m"),
        ("ticket", "1d", "1h"),
        ("ticket", "3d", "3h"),
    ]
    assert "> 14.4" in alerts[0]["expr"] and "modelport:slo_burn_rate:5m" in alerts[0]["expr"]
    records = [r["record"] for r in rules["rules"] if "record" in r]
    assert "modelport:slo_errors:ratio_rate30d" in records
    assert "modelport:slo_error_budget_remaining:ratio" in records
    assert endpoint_rules([]) == "groups: []\n"


@pytest.mark.slow  # runs promtool
def test_burn_rate_alerts_fire_on_a_burning_endpoint_only(tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        skip_or_fail("promtool is not installed (Debian: apt-get install prometheus)")
    assert promtool is not None
    text = endpoint_rules([("fraud", SLOS), ("steady", SLOS)])
    (tmp_path / "slos.yml").write_text(text)
    rules = {"groups": [group(endpoint_objective(e, s)) for e in ("fraud", "steady") for s in SLOS]}
    assert render(rules) == text
    budget_left = 'modelport:slo_error_budget_remaining:ratio{endpoint="steady",slo="availability"}'
    burn = 'modelport:slo_burn_rate:1h{endpoint="fraud",slo="availability"}'
    unit = {
        "rule_files": ["slos.yml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": series("fraud", errors=10, slow=45, failed_jobs=19)
                + series("steady", errors=0, slow=0, failed_jobs=0),
                "alert_rule_test": [
                    {
                        # 10% errors burn 100x the 0.1% budget: the 1h/5m pair pages after
                        # its 2 minutes; 6h/30m waits 15 minutes, the tickets an hour.
                        "eval_time": "10m",
                        "alertname": ALERT,
                        "exp_alerts": [
                            paged(rules, "fraud", "availability"),
                            paged(rules, "fraud", "p99"),
                            paged(rules, "fraud", "jobs"),
                        ],
                    },
                    {"eval_time": "1m", "alertname": ALERT, "exp_alerts": []},
                ],
                "promql_expr_test": [
                    {
                        # 10 errors in 100 calls a minute, over a 0.001 budget
                        "expr": f"round({burn})",
                        "eval_time": "30m",
                        "exp_samples": [
                            {"labels": '{endpoint="fraud",slo="availability"}', "value": 100}
                        ],
                    },
                    {
                        "expr": budget_left,
                        "eval_time": "30m",
                        "exp_samples": [{"labels": budget_left, "value": 1}],
                    },
                ],
            }
        ],
    }
    (tmp_path / "slos_test.yml").write_text(render(unit))
    ran = subprocess.run(
        [promtool, "test", "rules", "slos_test.yml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
