"""The shipped operations files (deploy/grafana, deploy/prometheus): current with their
definitions (scripts/deploy_files.py), accepted and unit-tested by promtool, and every
metric a dashboard panel or a rule queries is on the platform's ``/metrics`` after
traffic (or recorded by a shipped or generated rule). The worker pool's series are on a
pool gateway's page only: they are listed (``POOL_SERIES``) and shown on a pool
gateway's collector with a worker, calls and cold starts."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import skip_or_fail
from tests.metering import conftest as metering_fixtures
from tests.serving.conftest import Serving, failing, make_serving, serving  # noqa: F401

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
DASHBOARDS = sorted((DEPLOY / "grafana").glob("*.json"))
RULES = sorted((DEPLOY / "prometheus").glob("*.yml"))
UNIT_TESTS = sorted((DEPLOY / "prometheus" / "tests").glob("*_test.yml"))
BUILTIN = {"ALERTS", "ALERTS_FOR_STATE"}
"""Series Prometheus makes itself."""
redis_url = metering_fixtures.redis_url
POOL_SERIES = {
    "modelport_pool_workers",
    "modelport_pool_ready_replicas",
    "modelport_pool_queued_requests",
    "modelport_pool_queue_wait_seconds",
    "modelport_pool_target_wait_seconds",
    "modelport_pool_requests_total",
    "modelport_pool_cold_starts_total",
}
"""Series of a pool gateway's ``/metrics`` (``serving/pool/metrics.py``), not of the
all-in-one process the traffic test runs."""

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
_MATCHERS = re.compile(r"\{[^{}]*\}")
_RANGE = re.compile(r"\[[^\]]*\]")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_NAME = re.compile(r"(?<![\w:$.])([a-zA-Z_:][a-zA-Z0-9_:]*)(?![\w:])(?!\s*\()")
_KEYWORDS = {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring"}
_KEYWORDS |= {"group_left", "group_right", "inf", "nan", "e"}


def metric_names(expr: str) -> set[str]:
    """The series names a PromQL expression reads: identifiers left once strings, label
    matchers, ranges and grouping clauses are taken out, less function calls (a name
    followed by ``(``), keywords and Grafana's ``$variables``."""
    text = _STRING.sub('""', expr)
    text = _MATCHERS.sub("", text)
    text = _RANGE.sub("", text)
    text = _GROUPING.sub("", text)
    text = re.sub(r"\$\w+", "", text)
    text = re.sub(r"\b\d+(?:\.\d+)?(?:e[+-]?\d+)?\b", "", text)
    return {n for n in _NAME.findall(text) if n.lower() not in _KEYWORDS}


def test_promql_names_are_read_through_functions_matchers_and_grouping() -> None:
    expr = (
        'histogram_quantile(0.99, sum by (model, le) (rate(a_bucket{model=~"$model", '
        'le="1.0"}[$__rate_interval]))) / on(instance) group_left(pod) b:c:ratio '
        'and d_total offset 5m > bool 1e-12 unless vector(1) or e_total{x="sum(y)"}'
    )
    assert metric_names(expr) == {"a_bucket", "b:c:ratio", "d_total", "e_total"}
    assert metric_names("ALERTS{alertname='x'}") == {"ALERTS"}
    assert metric_names("1 - clamp_min(x[5m], 0)") == {"x"}


def dashboard_queries() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in DASHBOARDS:
        board = json.loads(path.read_text())
        exprs = [t["expr"] for p in board["panels"] for t in p["targets"]]
        # A variable's label_values(series, label): the series is queried, not the label.
        exprs += [
            re.sub(r",\s*\w+\)$", ")", v["definition"])
            for v in board["templating"]["list"]
            if v["type"] == "query"
        ]
        found[path.name] = exprs
    return found


def rule_exprs(text: str) -> tuple[list[str], set[str]]:
    """The expressions and the recorded names of a rule file as ``render`` writes it
    (every value a JSON-quoted scalar)."""
    exprs = [json.loads(m) for m in re.findall(r'^\s*-?\s*expr: (".*")$', text, re.M)]
    records = {json.loads(m) for m in re.findall(r'^\s*-?\s*record: (".*")$', text, re.M)}
    return exprs, records


def test_the_files_are_current_with_their_definitions() -> None:
    spec = importlib.util.spec_from_file_location(
        "deploy_files", ROOT / "scripts" / "deploy_files.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    defined = module.files()
    assert set(defined) == {*DASHBOARDS, *RULES}
    stale = [p.name for p, text in defined.items() if p.read_text() != text]
    assert not stale, f"{stale}: run scripts/deploy_files.py"
    names = {p.stem for p in DASHBOARDS}
    assert names == {
        "modelport-overview",
        "modelport-models",
        "modelport-tenants",
        "modelport-slos",
        "modelport-cost",
        "modelport-generation",
        "modelport-pool",
    }
    for path in DASHBOARDS:
        board = json.loads(path.read_text())
        assert board["uid"] == path.stem and board["panels"]
        for panel in board["panels"]:
            assert panel["targets"] and all(t["expr"] for t in panel["targets"]), panel
    assert {p.name for p in UNIT_TESTS} == {"modelport-rules_test.yml", "modelport-slos_test.yml"}


def _promtool() -> str:
    promtool = shutil.which("promtool")
    if promtool is None:
        skip_or_fail("promtool is not installed (Debian: apt-get install prometheus)")
    assert promtool is not None
    return promtool


@pytest.mark.slow  # runs promtool
def test_promtool_checks_and_unit_tests_the_rules() -> None:
    promtool = _promtool()
    checked = subprocess.run(
        [promtool, "check", "rules", *map(str, RULES)], capture_output=True, text=True, timeout=60
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = subprocess.run(
        [promtool, "test", "rules", *(p.name for p in UNIT_TESTS)],
        cwd=UNIT_TESTS[0].parent,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert tested.stdout.count("SUCCESS") == len(UNIT_TESTS), tested.stdout


def test_every_queried_metric_is_on_metrics_after_traffic(serving: Serving) -> None:  # noqa: F811
    good = serving.publish("acme/fraud", "1")
    bad = serving.publish("acme/broken", "1", failing())
    slos = [
        {"name": "availability", "kind": "availability", "objective": 0.999},
        {"name": "p99", "kind": "latency", "objective": 0.99, "threshold_ms": 250},
        {"name": "jobs", "kind": "completion", "objective": 0.95, "threshold_ms": 3_600_000},
    ]
    serving.endpoint("fraud", slos=slos)
    serving.endpoint("broken")
    serving.deploy("fraud", [(good, 100)])
    serving.deploy("broken", [(bad, 100)])
    assert serving.predict("fraud").status_code == 200
    assert serving.predict("fraud", {"inputs": {"z": [[1, 2, 3, 4]]}}).status_code == 400
    assert serving.predict("broken").status_code >= 500
    v2 = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1, 2, 3, 4]}]}
    assert serving.client.post("/v2/models/acme/fraud/infer", json=v2).status_code == 200
    generated = serving.client.get("/api/slos/rules").text
    page = serving.client.get("/metrics")
    assert page.status_code == 200
    families = list(text_string_to_metric_families(page.text))
    sampled = {s.name for f in families for s in f.samples}
    declared = {f.name for f in families}

    def present(name: str) -> bool:
        if name in sampled or name in declared:
            return True
        for suffix in ("_total", "_bucket", "_count", "_sum"):
            if name.endswith(suffix) and name.removesuffix(suffix) in declared:
                return True
        return False

    recorded = BUILTIN | POOL_SERIES
    exprs: dict[str, list[str]] = dashboard_queries()
    for path in RULES:
        found, records = rule_exprs(path.read_text())
        exprs[path.name] = found
        recorded |= records
    found, records = rule_exprs(generated)
    exprs["GET /api/slos/rules"] = found
    recorded |= records
    missing = {
        (where, name)
        for where, queries in exprs.items()
        for query in queries
        for name in metric_names(query)
        if name not in recorded and not present(name)
    }
    assert not missing, sorted(missing)
    assert sum(len(q) for q in exprs.values()) > 100
    # The series the SLOs and costs read carry this traffic's samples.
    for name in (
        "modelport_endpoint_requests_total",
        "modelport_endpoint_request_duration_seconds_bucket",
        "modelport_http_request_duration_seconds_bucket",
        "modelport_inference_request_duration_seconds_bucket",
        "modelport_compute_seconds_total",
        "process_cpu_seconds_total",
    ):
        assert name in sampled, name


def test_the_pool_series_are_on_a_pool_gateways_metrics(redis_url: str) -> None:
    """Each of ``POOL_SERIES`` carries a sample on a pool gateway's collector once a
    worker holds a ready version, a call was routed and one waited on a cold start; the
    dashboards and rules read no other pool series."""
    import redis
    from prometheus_client import CollectorRegistry, generate_latest

    from modelport.keyspace import Keyspace
    from modelport.serving.pool.metrics import PoolCollector
    from modelport.serving.pool.registry import RedisWorkerRegistry
    from modelport.serving.pool.scaler import CallCounter
    from modelport.serving.pool.types import WorkerInfo
    from modelport.serving.pool.view import PoolView

    client = redis.Redis.from_url(redis_url)
    keys = Keyspace(uuid.uuid4().hex)
    registry = RedisWorkerRegistry(client, keys)
    ref = "acme/a:1"
    registry.announce(
        WorkerInfo(id="w1", address="a:1", versions={ref: "ready"}, queued={ref: 1}),
        lease_seconds=30,
    )
    view = PoolView(registry)
    view.refresh()
    calls = CallCounter()
    calls.record(ref)
    calls.cold_start(ref, "refused")
    scraped = CollectorRegistry()
    scraped.register(PoolCollector(view, calls, target_wait_seconds=0.5))
    families = list(text_string_to_metric_families(generate_latest(scraped).decode()))
    sampled = {s.name for f in families for s in f.samples}
    for name in client.scan_iter(f"{keys.prefix}*"):
        client.delete(name)
    client.close()
    assert sampled >= POOL_SERIES, sorted(POOL_SERIES - sampled)
    queried = {
        name
        for queries in dashboard_queries().values()
        for query in queries
        for name in metric_names(query)
    }
    for path in RULES:
        queried |= {n for e in rule_exprs(path.read_text())[0] for n in metric_names(e)}
    pool = {name for name in queried if name.startswith("modelport_pool_")}
    assert pool == POOL_SERIES, sorted(pool ^ POOL_SERIES)
