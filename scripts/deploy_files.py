"""Write the shipped operations files: Grafana dashboards (deploy/grafana/*.json) and
Prometheus rules (deploy/prometheus/*.yml), from the definitions below.

    .venv/bin/python scripts/deploy_files.py           write them
    .venv/bin/python scripts/deploy_files.py --check   exit 1 if one differs from its definition

The promtool unit tests under deploy/prometheus/tests are written by hand.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from modelport.observability.slo_rules import Objective, render, rule_file

ROOT = Path(__file__).resolve().parents[1] / "deploy"
RATE = "$__rate_interval"
INFER = '"/v2/models/.+/infer|/v2/models/.+/versions/.+/infer|/api/endpoints/.+:predict"'

# ---- Prometheus: the platform's own SLOs (an endpoint's come from GET /api/slos/rules)
PLATFORM_SLOS = (
    Objective(
        labels={"slo": "inference_availability"},
        objective=0.999,
        window_days=30,
        bad=f'sum(rate(modelport_http_requests_total{{route=~{INFER}, status=~"5.."}}[$w]))',
        total=f"sum(rate(modelport_http_requests_total{{route=~{INFER}}}[$w]))",
        summary="99.9% of inference calls (/v2 infer, an endpoint's :predict) do not fail",
    ),
    Objective(
        labels={"slo": "inference_latency"},
        objective=0.99,
        window_days=30,
        bad=f"sum(rate(modelport_http_request_duration_seconds_count{{route=~{INFER}}}[$w]))"
        f' - sum(rate(modelport_http_request_duration_seconds_bucket{{route=~{INFER}, le="1.0"}}[$w]))',
        total=f"sum(rate(modelport_http_request_duration_seconds_count{{route=~{INFER}}}[$w]))",
        summary="99% of inference calls answer within 1 s",
    ),
    Objective(
        labels={"slo": "job_completion"},
        objective=0.95,
        window_days=30,
        bad="sum(rate(modelport_job_duration_seconds_count[$w]))"
        ' - sum(rate(modelport_job_duration_seconds_bucket{state="succeeded", le="3600.0"}[$w]))',
        total="sum(rate(modelport_job_duration_seconds_count[$w]))",
        summary="95% of jobs succeed within an hour of their submission",
    ),
)


def _record(name: str, expr: str) -> dict[str, Any]:
    return {"record": name, "expr": expr}


def _alert(name: str, expr: str, wait: str, severity: str, summary: str) -> dict[str, Any]:
    return {
        "alert": name,
        "expr": expr,
        "for": wait,
        "labels": {"severity": severity},
        "annotations": {"summary": summary},
    }


RULES = {
    "groups": [
        {
            "name": "modelport-recording",
            "interval": "30s",
            "rules": [
                _record(
                    "modelport:inference_requests:rate5m",
                    "sum by (model, version, outcome) "
                    "(rate(modelport_inference_requests_total[5m]))",
                ),
                _record(
                    "modelport:inference_latency_seconds:p99_5m",
                    "histogram_quantile(0.99, sum by (model, version, le) "
                    "(rate(modelport_inference_request_duration_seconds_bucket[5m])))",
                ),
                _record(
                    "modelport:http_errors:ratio_rate5m",
                    'sum(rate(modelport_http_requests_total{status=~"5.."}[5m]))'
                    " / clamp_min(sum(rate(modelport_http_requests_total[5m])), 1e-12)",
                ),
                _record(
                    "modelport:compute_cost_micros:rate1h",
                    "sum by (tenant, model) (rate(modelport_compute_cost_micros_total[1h]))",
                ),
                _record(
                    "modelport:revenue_micros:rate1h",
                    "sum by (tenant, model) (rate(modelport_revenue_micros_total[1h]))",
                ),
                # Revenue less cost, per model (either may be absent: a free or an
                # unpriced model counts as 0 on that side).
                _record(
                    "modelport:model_margin_micros:rate1h",
                    "(sum by (model) (modelport:revenue_micros:rate1h)"
                    " or 0 * sum by (model) (modelport:compute_cost_micros:rate1h))"
                    " - (sum by (model) (modelport:compute_cost_micros:rate1h)"
                    " or 0 * sum by (model) (modelport:revenue_micros:rate1h))",
                ),
                _record(
                    "modelport:tenant_compute_share:ratio_rate1h",
                    "sum by (tenant) (rate(modelport_compute_seconds_total[1h]))"
                    " / scalar(sum(rate(modelport_compute_seconds_total[1h])))",
                ),
                # A process's CPU time spent on no call (idle or overhead): 1 - its
                # attributed compute over its CPU time.
                _record(
                    "modelport:process_idle_ratio:rate5m",
                    'clamp_min(1 - sum by (instance) (rate(modelport_compute_seconds_total{device="cpu"}[5m]))'
                    " / sum by (instance) (rate(process_cpu_seconds_total[5m])), 0)",
                ),
            ],
        },
        {
            "name": "modelport-alerts",
            "rules": [
                _alert(
                    "ModelportBreakerOpen",
                    "max by (backend) (modelport_serving_breaker_state) == 2",
                    "5m",
                    "page",
                    "The circuit breaker of backend {{ $labels.backend }} is open",
                ),
                _alert(
                    "ModelportBackendDown",
                    "max by (backend) (modelport_serving_backend_up) == 0",
                    "5m",
                    "ticket",
                    "Backend {{ $labels.backend }} fails its health probe",
                ),
                _alert(
                    "ModelportWorkerCrashes",
                    "sum by (model, version) (increase(modelport_model_worker_crashes_total[15m])) > 3",
                    "0m",
                    "page",
                    "Workers of {{ $labels.model }}:{{ $labels.version }} keep crashing",
                ),
                _alert(
                    "ModelportPredictionLogDropping",
                    'sum(increase(modelport_prediction_log_records_total{result="dropped"}[10m])) > 0',
                    "0m",
                    "ticket",
                    "The prediction log drops records: its buffer is full",
                ),
                _alert(
                    "ModelportQueueBacklog",
                    "sum by (model, version) (modelport_inference_queue_depth) > 100",
                    "10m",
                    "ticket",
                    "{{ $labels.model }}:{{ $labels.version }} has a standing queue",
                ),
                _alert(
                    "ModelportNegativeMargin",
                    "modelport:model_margin_micros:rate1h < 0",
                    "6h",
                    "ticket",
                    "{{ $labels.model }} costs more to serve than it earns",
                ),
                _alert(
                    "ModelportGenerationPreempting",
                    "sum by (model, version) (rate(modelport_generation_preemptions_total[10m])) > 1",
                    "15m",
                    "ticket",
                    "{{ $labels.model }}:{{ $labels.version }} preempts sequences: KV memory is short",
                ),
                # The pool's autoscaler adds a replica per step while a version waits past
                # its target: a wait that stays up for 15 minutes with its ready replicas
                # unchanged means it can grow no more (its deployment's max_replicas, or
                # no worker with room while the workers' own autoscaler is at its max).
                _alert(
                    "ModelportPoolQueueWaitOverTarget",
                    "(max by (version) (min_over_time(modelport_pool_queue_wait_seconds[15m]))"
                    " > on() group_left() max(modelport_pool_target_wait_seconds))"
                    " and on(version)"
                    " (max by (version) (changes(modelport_pool_ready_replicas[15m])) == 0)",
                    "10m",
                    "page",
                    "{{ $labels.version }} waits past the pool's target and gets no more replicas:"
                    " raise its max_replicas or the workers' maximum",
                ),
            ],
        },
    ]
}


# ---- Grafana
def _target(expr: str, legend: str, ref: int) -> dict[str, Any]:
    return {
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "expr": expr,
        "legendFormat": legend,
        "refId": chr(ord("A") + ref),
    }


def panel(
    title: str, *queries: tuple[str, str], unit: str = "short", kind: str = "timeseries"
) -> dict[str, Any]:
    return {
        "type": kind,
        "title": title,
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "targets": [_target(expr, legend, i) for i, (expr, legend) in enumerate(queries)],
    }


def _variable(name: str, query: str, *, multi: bool = True) -> dict[str, Any]:
    return {
        "name": name,
        "type": "query",
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "query": {"query": query, "refId": name},
        "definition": query,
        "refresh": 2,
        "multi": multi,
        "includeAll": multi,
        "current": {},
    }


def dashboard(
    uid: str, title: str, panels: list[dict[str, Any]], variables: tuple[dict[str, Any], ...] = ()
) -> dict[str, Any]:
    laid = []
    for index, found in enumerate(panels):
        laid.append(
            {
                "id": index + 1,
                "gridPos": {"h": 8, "w": 12, "x": 12 * (index % 2), "y": 8 * (index // 2)},
                **found,
            }
        )
    source = {
        "name": "datasource",
        "type": "datasource",
        "query": "prometheus",
        "current": {},
        "hide": 0,
    }
    return {
        "uid": uid,
        "title": title,
        "tags": ["modelport"],
        "timezone": "utc",
        "schemaVersion": 39,
        "version": 1,
        "editable": True,
        "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "templating": {"list": [source, *variables]},
        "panels": laid,
    }


MODEL = '{model=~"$model", version=~"$version"}'
MODEL_VARS = (
    _variable("model", "label_values(modelport_inference_requests_total, model)"),
    _variable(
        "version", 'label_values(modelport_inference_requests_total{model=~"$model"}, version)'
    ),
)
GEN = '{model=~"$model", version=~"$version"}'
GEN_VARS = (
    _variable("model", "label_values(modelport_generation_tokens_total, model)"),
    _variable(
        "version", 'label_values(modelport_generation_tokens_total{model=~"$model"}, version)'
    ),
)
TENANT_VARS = (_variable("tenant", "label_values(modelport_compute_seconds_total, tenant)"),)
SLO_VARS = (
    _variable("endpoint", "label_values(modelport:slo_burn_rate:1h, endpoint)"),
    _variable("slo", 'label_values(modelport:slo_burn_rate:1h{endpoint=~"$endpoint"}, slo)'),
)
SLO = '{endpoint=~"$endpoint", slo=~"$slo"}'


POOL = '{version=~"$version"}'
POOL_VARS = (_variable("version", "label_values(modelport_pool_ready_replicas, version)"),)


def _q(quantile: float, hist: str, where: str, by: str) -> str:
    return f"histogram_quantile({quantile}, sum by ({by}, le) (rate({hist}_bucket{where}[{RATE}])))"


DASHBOARDS = {
    "modelport-overview": dashboard(
        "modelport-overview",
        "modelport: platform overview",
        [
            panel(
                "HTTP requests by route and status",
                (
                    f"sum by (route, status) (rate(modelport_http_requests_total[{RATE}]))",
                    "{{route}} {{status}}",
                ),
                unit="reqps",
            ),
            panel(
                "HTTP 5xx ratio",
                ("modelport:http_errors:ratio_rate5m", "5xx"),
                unit="percentunit",
            ),
            panel(
                "HTTP p99 latency by route",
                (_q(0.99, "modelport_http_request_duration_seconds", "", "route"), "{{route}}"),
                unit="s",
            ),
            panel(
                "Inference requests by outcome",
                (
                    f"sum by (outcome) (rate(modelport_inference_requests_total[{RATE}]))",
                    "{{outcome}}",
                ),
                unit="reqps",
            ),
            panel(
                "Queue depth by model",
                ("sum by (model) (modelport_inference_queue_depth)", "{{model}}"),
            ),
            panel(
                "Circuit breakers (0 closed, 1 half-open, 2 open) and backend health",
                ("max by (backend) (modelport_serving_breaker_state)", "breaker {{backend}}"),
                ("min by (backend) (modelport_serving_backend_up)", "up {{backend}}"),
            ),
            panel(
                "Fallbacks by endpoint and kind",
                (
                    f"sum by (endpoint, kind) (rate(modelport_serving_fallbacks_total[{RATE}]))",
                    "{{endpoint}} {{kind}}",
                ),
                unit="reqps",
            ),
            panel(
                "Prediction log",
                (
                    f"sum by (result) (rate(modelport_prediction_log_records_total[{RATE}]))",
                    "{{result}}",
                ),
                ("sum(modelport_prediction_log_buffer_depth)", "buffered"),
            ),
            panel(
                "Process CPU and memory",
                (
                    f"sum by (instance) (rate(process_cpu_seconds_total[{RATE}]))",
                    "cpu {{instance}}",
                ),
                ("sum by (instance) (process_resident_memory_bytes)", "rss {{instance}}"),
            ),
        ],
    ),
    "modelport-models": dashboard(
        "modelport-models",
        "modelport: per model and version",
        [
            panel(
                "Requests by outcome",
                (
                    f"sum by (model, version, outcome) (rate(modelport_inference_requests_total{MODEL}[{RATE}]))",
                    "{{model}}:{{version}} {{outcome}}",
                ),
                unit="reqps",
            ),
            panel(
                "Latency in the runtime (p50, p99)",
                (
                    _q(
                        0.5, "modelport_inference_request_duration_seconds", MODEL, "model, version"
                    ),
                    "p50 {{model}}:{{version}}",
                ),
                (
                    _q(
                        0.99,
                        "modelport_inference_request_duration_seconds",
                        MODEL,
                        "model, version",
                    ),
                    "p99 {{model}}:{{version}}",
                ),
                unit="s",
            ),
            panel(
                "Queue wait and execution (p99)",
                (
                    _q(0.99, "modelport_inference_queue_duration_seconds", MODEL, "model, version"),
                    "queue {{model}}:{{version}}",
                ),
                (
                    _q(
                        0.99,
                        "modelport_inference_execution_duration_seconds",
                        MODEL,
                        "model, version",
                    ),
                    "execute {{model}}:{{version}}",
                ),
                unit="s",
            ),
            panel(
                "Rows per batch (mean)",
                (
                    f"sum by (model, version) (rate(modelport_inference_batch_size_sum{MODEL}[{RATE}]))"
                    f" / sum by (model, version) (rate(modelport_inference_batch_size_count{MODEL}[{RATE}]))",
                    "{{model}}:{{version}}",
                ),
            ),
            panel(
                "Queued requests by priority",
                (
                    f"sum by (priority) (rate(modelport_inference_queued_requests_total{MODEL}[{RATE}]))",
                    "{{priority}}",
                ),
                (
                    "sum by (model, version) (modelport_inference_queue_depth" + MODEL + ")",
                    "depth {{model}}:{{version}}",
                ),
            ),
            panel(
                "Memory",
                (
                    "sum by (model, version, memory) (modelport_model_memory_bytes" + MODEL + ")",
                    "{{memory}} {{model}}:{{version}}",
                ),
                unit="bytes",
            ),
            panel(
                "Loads: cold starts and phase time (p99)",
                (
                    f"sum by (model, version) (increase(modelport_model_cold_starts_total{MODEL}[{RATE}]))",
                    "cold starts {{model}}:{{version}}",
                ),
                (
                    _q(0.99, "modelport_model_load_phase_duration_seconds", MODEL, "phase"),
                    "{{phase}}",
                ),
            ),
            panel(
                "Worker processes: starts and crashes",
                (
                    f"sum by (model, version) (increase(modelport_model_worker_starts_total{MODEL}[{RATE}]))",
                    "starts {{model}}:{{version}}",
                ),
                (
                    f"sum by (reason) (increase(modelport_model_worker_crashes_total{MODEL}[{RATE}]))",
                    "{{reason}}",
                ),
            ),
        ],
        MODEL_VARS,
    ),
    "modelport-tenants": dashboard(
        "modelport-tenants",
        "modelport: per tenant",
        [
            panel(
                "Compute by model",
                (
                    f'sum by (model, device) (rate(modelport_compute_seconds_total{{tenant=~"$tenant"}}[{RATE}]))',
                    "{{model}} {{device}}",
                ),
                unit="s",
            ),
            panel(
                "Share of the platform's compute",
                ('modelport:tenant_compute_share:ratio_rate1h{tenant=~"$tenant"}', "{{tenant}}"),
                unit="percentunit",
            ),
            panel(
                "Cost and revenue (micros per second)",
                (
                    'sum by (tenant) (modelport:compute_cost_micros:rate1h{tenant=~"$tenant"})',
                    "cost {{tenant}}",
                ),
                (
                    'sum by (tenant) (modelport:revenue_micros:rate1h{tenant=~"$tenant"})',
                    "revenue {{tenant}}",
                ),
            ),
            panel(
                "Revenue by model (micros per second)",
                (
                    'sum by (model) (modelport:revenue_micros:rate1h{tenant=~"$tenant"})',
                    "{{model}}",
                ),
            ),
        ],
        TENANT_VARS,
    ),
    "modelport-slos": dashboard(
        "modelport-slos",
        "modelport: SLOs",
        [
            panel(
                "Error budget left (over the SLO's window)",
                (f"modelport:slo_error_budget_remaining:ratio{SLO}", "{{endpoint}} {{slo}}"),
                unit="percentunit",
                kind="stat",
            ),
            panel(
                "Burn rate, page windows (1h, 5m at 14.4; 6h, 30m at 6)",
                (f"modelport:slo_burn_rate:1h{SLO}", "1h {{endpoint}} {{slo}}"),
                (f"modelport:slo_burn_rate:5m{SLO}", "5m {{endpoint}} {{slo}}"),
                (f"modelport:slo_burn_rate:6h{SLO}", "6h {{endpoint}} {{slo}}"),
                (f"modelport:slo_burn_rate:30m{SLO}", "30m {{endpoint}} {{slo}}"),
            ),
            panel(
                "Burn rate, ticket windows (1d, 2h at 3; 3d, 6h at 1)",
                (f"modelport:slo_burn_rate:1d{SLO}", "1d {{endpoint}} {{slo}}"),
                (f"modelport:slo_burn_rate:2h{SLO}", "2h {{endpoint}} {{slo}}"),
                (f"modelport:slo_burn_rate:3d{SLO}", "3d {{endpoint}} {{slo}}"),
            ),
            panel(
                "Objective and error ratio (1h)",
                (f"modelport:slo_objective:ratio{SLO}", "objective {{endpoint}} {{slo}}"),
                (f"modelport:slo_errors:ratio_rate1h{SLO}", "errors {{endpoint}} {{slo}}"),
                unit="percentunit",
            ),
            panel(
                "Endpoint calls by outcome",
                (
                    f'sum by (endpoint, outcome) (rate(modelport_endpoint_requests_total{{endpoint=~"$endpoint"}}[{RATE}]))',
                    "{{endpoint}} {{outcome}}",
                ),
                unit="reqps",
            ),
            panel(
                "Endpoint latency (p99)",
                (
                    _q(
                        0.99,
                        "modelport_endpoint_request_duration_seconds",
                        '{endpoint=~"$endpoint"}',
                        "endpoint",
                    ),
                    "{{endpoint}}",
                ),
                unit="s",
            ),
            panel(
                "Jobs: time to end (p90) by state",
                (
                    _q(
                        0.9,
                        "modelport_job_duration_seconds",
                        '{endpoint=~"$endpoint"}',
                        "endpoint, state",
                    ),
                    "{{endpoint}} {{state}}",
                ),
                unit="s",
            ),
            panel(
                "Firing SLO alerts",
                (
                    'sum by (endpoint, slo, severity) (ALERTS{alertname="ModelportSLOBurnRate", alertstate="firing"})',
                    "{{endpoint}} {{slo}} {{severity}}",
                ),
            ),
        ],
        SLO_VARS,
    ),
    "modelport-cost": dashboard(
        "modelport-cost",
        "modelport: cost",
        [
            panel(
                "Compute cost by model (micros per second)",
                ("sum by (model) (modelport:compute_cost_micros:rate1h)", "{{model}}"),
            ),
            panel(
                "Margin by model (revenue less cost, micros per second)",
                ("modelport:model_margin_micros:rate1h", "{{model}}"),
            ),
            panel(
                "Cost per call by model (micros)",
                (
                    f"sum by (model) (rate(modelport_compute_cost_micros_total[{RATE}]))"
                    f' / sum by (model) (rate(modelport_inference_requests_total{{outcome="success"}}[{RATE}]))',
                    "{{model}}",
                ),
            ),
            panel(
                "Tenants' shares of the compute",
                ("modelport:tenant_compute_share:ratio_rate1h", "{{tenant}}"),
                unit="percentunit",
            ),
            panel(
                "Idle ratio by process (CPU time attributed to no call)",
                ("modelport:process_idle_ratio:rate5m", "{{instance}}"),
                unit="percentunit",
            ),
            panel(
                "Price of a second of compute (micros)",
                ("max by (device) (modelport_compute_price_micros)", "{{device}}"),
                kind="stat",
            ),
        ],
    ),
    "modelport-generation": dashboard(
        "modelport-generation",
        "modelport: generative engines",
        [
            panel(
                "Time to first token (p50, p99)",
                (
                    _q(
                        0.5,
                        "modelport_generation_time_to_first_token_seconds",
                        GEN,
                        "model, version",
                    ),
                    "p50 {{model}}:{{version}}",
                ),
                (
                    _q(
                        0.99,
                        "modelport_generation_time_to_first_token_seconds",
                        GEN,
                        "model, version",
                    ),
                    "p99 {{model}}:{{version}}",
                ),
                unit="s",
            ),
            panel(
                "Time per output token (p50, p99)",
                (
                    _q(
                        0.5,
                        "modelport_generation_time_per_output_token_seconds",
                        GEN,
                        "model, version",
                    ),
                    "p50 {{model}}:{{version}}",
                ),
                (
                    _q(
                        0.99,
                        "modelport_generation_time_per_output_token_seconds",
                        GEN,
                        "model, version",
                    ),
                    "p99 {{model}}:{{version}}",
                ),
                unit="s",
            ),
            panel(
                "Tokens per second",
                (
                    f"sum by (model, version) (rate(modelport_generation_tokens_total{GEN}[{RATE}]))",
                    "output {{model}}:{{version}}",
                ),
                (
                    f"sum by (model, version) (rate(modelport_generation_prompt_tokens_total{GEN}[{RATE}]))",
                    "prompt {{model}}:{{version}}",
                ),
            ),
            panel(
                "Sequences running and waiting",
                (
                    "sum by (model, version) (modelport_generation_running_sequences" + GEN + ")",
                    "running {{model}}:{{version}}",
                ),
                (
                    "sum by (model, version) (modelport_generation_waiting_sequences" + GEN + ")",
                    "waiting {{model}}:{{version}}",
                ),
            ),
            panel(
                "KV cache reserved and preemptions",
                (
                    "sum by (model, version) (modelport_generation_kv_cache_bytes" + GEN + ")",
                    "kv {{model}}:{{version}}",
                ),
                (
                    f"sum by (model, version) (rate(modelport_generation_preemptions_total{GEN}[{RATE}]))",
                    "preempted {{model}}:{{version}}",
                ),
            ),
            panel(
                "Prefix cache hit ratio",
                (
                    f"sum by (model, version) (rate(modelport_generation_prefix_cache_hit_tokens_total{GEN}[{RATE}]))"
                    f" / sum by (model, version) (rate(modelport_generation_prefix_cache_queried_tokens_total{GEN}[{RATE}]))",
                    "{{model}}:{{version}}",
                ),
                unit="percentunit",
            ),
            panel(
                "Engines",
                (
                    "max by (model, version, engine) (modelport_generation_engine_info" + GEN + ")",
                    "{{model}}:{{version}} {{engine}}",
                ),
                kind="table",
            ),
        ],
        GEN_VARS,
    ),
    # Every gateway reports the same view of the pool (max over them); each counts the
    # calls it routed (sum over them).
    "modelport-pool": dashboard(
        "modelport-pool",
        "modelport: worker pool",
        [
            panel(
                "Live workers by pool",
                ("max by (pool) (modelport_pool_workers)", "{{pool}}"),
            ),
            panel(
                "Ready replicas per version",
                ("max by (version) (modelport_pool_ready_replicas" + POOL + ")", "{{version}}"),
            ),
            panel(
                "Predicted queue wait per version, against the target",
                (
                    "max by (version) (modelport_pool_queue_wait_seconds" + POOL + ")",
                    "{{version}}",
                ),
                ("max(modelport_pool_target_wait_seconds)", "target"),
                unit="s",
            ),
            panel(
                "Calls routed to the pool per version",
                (
                    f"sum by (version) (rate(modelport_pool_requests_total{POOL}[{RATE}]))",
                    "{{version}}",
                ),
                unit="reqps",
            ),
            panel(
                "Requests queued on the workers per version",
                ("max by (version) (modelport_pool_queued_requests" + POOL + ")", "{{version}}"),
            ),
            panel(
                "Cold starts: calls that waited for a version to start, by outcome",
                (
                    f"sum by (version, outcome) (increase(modelport_pool_cold_starts_total{POOL}[{RATE}]))",
                    "{{version}} {{outcome}}",
                ),
            ),
        ],
        POOL_VARS,
    ),
}


def files() -> dict[Path, str]:
    """Every shipped file, by path, as it should read."""
    found = {
        ROOT / "prometheus" / "modelport-slos.yml": render(rule_file(PLATFORM_SLOS)),
        ROOT / "prometheus" / "modelport-rules.yml": render(RULES),
    }
    for name, board in DASHBOARDS.items():
        found[ROOT / "grafana" / f"{name}.json"] = json.dumps(board, indent=2) + "\n"
    return found


def main(argv: list[str]) -> int:
    stale = []
    for path, text in files().items():
        if "--check" in argv:
            if not path.exists() or path.read_text() != text:
                stale.append(path)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for path in stale:
        print(f"{path} differs from scripts/deploy_files.py: run it", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
