"""Prometheus rules of SLOs: error ratios, burn rates, error budgets and
multi-window, multi-burn-rate alerts (the Google SRE workbook, "Alerting on SLOs").

For each SLO one rule group records, per window, the share of bad events
(``modelport:slo_errors:ratio_rate<window>``), the burn rate over each alert window
(``modelport:slo_burn_rate:<window>``: the error ratio over the budget, ``1 -
objective``; 1 spends the budget exactly over the SLO's window), the objective
(``modelport:slo_objective:ratio``) and the share of the budget left over the SLO's window
(``modelport:slo_error_budget_remaining:ratio``); then it alerts when both a long and a
short window burn faster than a rate (``BURN_ALERTS``): the long window makes it
significant, the short one makes it stop soon after the burning does.

Every series is labelled ``slo`` and, for an endpoint's, ``endpoint``. ``render`` writes
the file as YAML (every string a JSON-quoted scalar, which YAML reads as written).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from modelport.observability.slo import SLO, SLOKind

# (severity, long window, short window, burn rate, for): the workbook's table 5-8 for a
# 30-day window (2% of the budget in 1h, 5% in 6h pages; 10% in 3d opens a ticket).
BURN_ALERTS = (
    ("page", "1h", "5m", 14.4, "2m"),
    ("page", "6h", "30m", 6.0, "15m"),
    ("ticket", "1d", "2h", 3.0, "1h"),
    ("ticket", "3d", "6h", 1.0, "3h"),
)
WINDOWS = ("5m", "30m", "1h", "2h", "6h", "1d", "3d")
ALERT = "ModelportSLOBurnRate"


@dataclass(frozen=True)
class Objective:
    """One SLO as the rules see it: its labels, its objective and its SLI as PromQL
    (``$w`` in ``bad`` and ``total`` stands for the window)."""

    labels: dict[str, str]
    objective: float
    window_days: int
    bad: str
    total: str
    summary: str

    @property
    def group(self) -> str:
        return "modelport-slo-" + "-".join(self.labels.values())

    def ratio(self, window: str) -> str:
        bad, total = self.bad.replace("$w", window), self.total.replace("$w", window)
        # No event in the window is no error (not NaN, which would hide the series).
        return f"({bad}) / clamp_min({total}, 1e-12)"


def _selector(labels: dict[str, str], **more: str) -> str:
    pairs = {**labels, **more}
    return ", ".join(f"{k}={json.dumps(v)}" for k, v in pairs.items())


def endpoint_objective(endpoint: str, slo: SLO) -> Objective:
    """``slo`` of ``endpoint`` over the series of ``slo_metrics``."""
    where = _selector({"endpoint": endpoint})
    labels = {"endpoint": endpoint, "slo": slo.name}
    if slo.kind is SLOKind.AVAILABILITY:
        calls = "sum(rate(modelport_endpoint_requests_total{%s, outcome=~%s}[$w]))"
        bad = calls % (where, '"error"')
        total = calls % (where, '"ok|error"')
        summary = f"{slo.objective:.3%} of calls to {endpoint} succeed"
        return Objective(labels, slo.objective, slo.window_days, bad, total, summary)
    if slo.kind is SLOKind.LATENCY:
        hist, good_where = "modelport_endpoint_request_duration_seconds", where
        summary = f"{slo.objective:.3%} of calls to {endpoint} answer within"
    else:
        hist = "modelport_job_duration_seconds"
        good_where = where + ', state="succeeded"'
        summary = f"{slo.objective:.3%} of jobs on {endpoint} succeed within"
    total = f"sum(rate({hist}_count{{{where}}}[$w]))"
    good = f'sum(rate({hist}_bucket{{{good_where}, le="{slo.threshold_le}"}}[$w]))'
    summary += " " + _duration(slo.threshold_ms or 0.0)
    return Objective(labels, slo.objective, slo.window_days, f"{total} - {good}", total, summary)


def _duration(ms: float) -> str:
    if ms < 1000:
        return f"{ms:g} ms"
    return f"{ms / 1000:g} s" if ms < 3_600_000 else f"{ms / 3_600_000:g} h"


def group(objective: Objective) -> dict[str, Any]:
    """The rule group of one SLO: its records, then its alerts (a group's rules are
    evaluated in order, so each alert reads the records of the same evaluation)."""
    labels = objective.labels
    where = _selector(labels)
    budget = 1 - objective.objective
    rules: list[dict[str, Any]] = [
        {"record": "modelport:slo_objective:ratio", "expr": f"vector({objective.objective!r})"}
    ]
    long_window = f"{objective.window_days}d"
    for window in (*WINDOWS, long_window):
        rules.append(
            {
                "record": f"modelport:slo_errors:ratio_rate{window}",
                "expr": objective.ratio(window),
            }
        )
    for window in WINDOWS:
        rules.append(
            {
                "record": f"modelport:slo_burn_rate:{window}",
                "expr": f"modelport:slo_errors:ratio_rate{window}{{{where}}} / {budget!r}",
            }
        )
    rules.append(
        {
            "record": "modelport:slo_error_budget_remaining:ratio",
            "expr": f"1 - modelport:slo_errors:ratio_rate{long_window}{{{where}}} / {budget!r}",
        }
    )
    for rule in rules:
        rule["labels"] = dict(labels)
    for severity, long, short, rate, wait in BURN_ALERTS:
        rules.append(
            {
                "alert": ALERT,
                "expr": f"modelport:slo_burn_rate:{long}{{{where}}} > {rate!r}\n"
                f"and modelport:slo_burn_rate:{short}{{{where}}} > {rate!r}",
                "for": wait,
                "labels": {**labels, "severity": severity, "long_window": long},
                "annotations": {
                    "summary": f"Error budget burning {rate:g}x too fast: {objective.summary}",
                    "description": (
                        f"Over the last {long} and {short} the error ratio is above "
                        f"{rate:g} times the budget ({budget:.4%}) of the {long_window} "
                        "window."
                    ),
                },
            }
        )
    return {"name": objective.group, "interval": "30s", "rules": rules}


def rule_file(objectives: Iterable[Objective]) -> dict[str, Any]:
    return {"groups": [group(o) for o in objectives]}


def endpoint_rules(endpoints: Iterable[tuple[str, Sequence[SLO]]]) -> str:
    """The rule file (YAML) of every SLO of ``endpoints`` (name, SLOs)."""
    objectives = [endpoint_objective(name, slo) for name, slos in endpoints for slo in slos]
    return render(rule_file(objectives))


def render(value: Any) -> str:
    """``value`` (dicts, lists, strings, numbers) as block YAML."""
    return "\n".join(_lines(value, 0)) + "\n"


def _lines(value: Any, indent: int) -> list[str]:
    pad = " " * indent
    if isinstance(value, dict):
        if not value:
            return [pad + "{}"]
        out: list[str] = []
        for key, item in value.items():
            if isinstance(item, (dict, list)) and item:
                out.append(f"{pad}{key}:")
                out.extend(_lines(item, indent + 2))
            else:
                out.append(f"{pad}{key}: {_scalar(item)}")
        return out
    if isinstance(value, list):
        if not value:
            return [pad + "[]"]
        out = []
        for item in value:
            inner = _lines(item, indent + 2)
            out.append(f"{pad}- {inner[0].lstrip()}")
            out.extend(inner[1:])
        return out
    return [pad + _scalar(value)]


def _scalar(value: Any) -> str:
    if isinstance(value, dict):
        return "{}"
    if isinstance(value, list):
        return "[]"
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, (int, float)):
        return repr(value)
    return json.dumps(str(value))  # a JSON string is a YAML double-quoted scalar
