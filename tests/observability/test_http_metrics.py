"""``/metrics`` counts every request by method, route template and status (401s and 400s
too) with its latency, shows the process and Python platform series, answers OpenMetrics
to a scraper that asks for it, and passes ``promtool check metrics``."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_om
from prometheus_client.parser import text_string_to_metric_families as parse_text
from starlette.testclient import TestClient

from modelport.api import create_app
from modelport.api.request_metrics import RouteTemplates
from modelport.app import build_services
from modelport.config import Settings
from modelport.observability.process_metrics import WorkerProcesses, worker_pids
from tests.conftest import ADMIN_KEY

ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}
OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory, sqlite_template: Path) -> Iterator[TestClient]:
    home = tmp_path_factory.mktemp("metrics-home")
    shutil.copyfile(sqlite_template, home / "modelport.db")
    services = build_services(
        Settings(
            home=home,
            database_url=f"sqlite:///{home / 'modelport.db'}",
            admin_key=ADMIN_KEY,
            auto_migrate=False,
        )
    )
    with TestClient(create_app(services)) as test_client:
        test_client.get("/healthz")
        test_client.get("/api/models")  # 401: no key
        test_client.get("/api/models/acme/iris", headers=ADMIN)  # 404
        test_client.get("/api/models/globex/fraud", headers=ADMIN)  # 404, same route
        test_client.get("/api/models", params={"limit": "many"}, headers=ADMIN)  # 400
        test_client.post("/v2/models/acme/iris/infer", json={})  # the lane: 401
        test_client.get("/no/such/path/4711")  # 404, no route
        yield test_client
    services.close()


def samples(text: str, name: str) -> list[tuple[dict[str, str], float]]:
    return [
        (dict(s.labels), s.value)
        for family in parse_text(text)
        for s in family.samples
        if s.name == name
    ]


def count(text: str, **labels: str) -> float:
    found = [v for lab, v in samples(text, "modelport_http_requests_total") if lab == labels]
    return sum(found)


def scrape(client: TestClient, accept: str | None = None) -> str:
    headers = dict(ADMIN)
    if accept:
        headers["Accept"] = accept
    response = client.get("/metrics", headers=headers)
    assert response.status_code == 200
    return response.text


def test_requests_are_counted_by_route_template_method_and_status(client: TestClient) -> None:
    text = scrape(client)
    assert count(text, method="GET", route="/healthz", status="200") == 1
    assert count(text, method="GET", route="/api/models", status="401") == 1
    assert count(text, method="GET", route="/api/models", status="400") == 1
    assert count(text, method="GET", route="/api/models/{owner}/{name}", status="404") == 2
    assert count(text, method="POST", route="/v2/models/{owner}/{name}/infer", status="401") == 1
    assert count(text, method="GET", route="unmatched", status="404") == 1
    routes = {lab["route"] for lab, _ in samples(text, "modelport_http_requests_total")}
    assert not any("acme" in r or "4711" in r for r in routes), routes


def test_latency_is_a_histogram_per_route_and_method(client: TestClient) -> None:
    text = scrape(client)
    counts = samples(text, "modelport_http_request_duration_seconds_count")
    by_route = {(lab["method"], lab["route"]): v for lab, v in counts}
    assert by_route[("GET", "/api/models/{owner}/{name}")] == 2
    buckets = [
        lab
        for lab, _ in samples(text, "modelport_http_request_duration_seconds_bucket")
        if lab["route"] == "/healthz"
    ]
    assert {"+Inf"} <= {lab["le"] for lab in buckets}


def test_process_and_platform_series_are_shown(client: TestClient) -> None:
    text = scrape(client)
    names = {s.name for family in parse_text(text) for s in family.samples}
    assert {"process_cpu_seconds_total", "process_resident_memory_bytes"} <= names
    assert "python_info" in names
    assert any(n.startswith("python_gc_") for n in names)


def test_openmetrics_is_answered_to_a_scraper_asking_for_it(client: TestClient) -> None:
    response = client.get("/metrics", headers={**ADMIN, "Accept": OPENMETRICS})
    assert response.headers["content-type"].startswith("application/openmetrics-text")
    assert response.text.endswith("# EOF\n")
    families = {f.name: f for f in parse_om(response.text)}
    assert families["modelport_http_requests"].type == "counter"
    plain = client.get("/metrics", headers=ADMIN)
    assert plain.headers["content-type"].startswith("text/plain")
    assert "# EOF" not in plain.text


@pytest.mark.slow  # runs promtool
def test_promtool_finds_nothing_to_complain_about(client: TestClient) -> None:
    # promtool checks the Prometheus text format only (read as that, OpenMetrics' HELP on
    # the family name looks missing); the OpenMetrics page is checked by the strict parser
    # in test_openmetrics_is_answered_to_a_scraper_asking_for_it.
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (Debian: apt-get install prometheus)")
    checked = subprocess.run(
        [promtool, "check", "metrics"],
        input=scrape(client),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert not (checked.stdout + checked.stderr).strip(), checked.stdout + checked.stderr


def test_route_templates_prefer_the_most_literal_match() -> None:
    templates = RouteTemplates(
        ["/v2/models/{owner}/{name}", "/v2/models/{name}/ready", "/api/endpoints/{name}:predict"],
        ["/api/docs/assets"],
    )
    assert templates.template("/v2/models/fraud/ready") == "/v2/models/{name}/ready"
    assert templates.template("/v2/models/acme/iris") == "/v2/models/{owner}/{name}"
    assert templates.template("/api/endpoints/e1:predict") == "/api/endpoints/{name}:predict"
    assert templates.template("/api/docs/assets/x.js") == "/api/docs/assets/{path}"
    assert templates.template("/v2/models/a/b/c/d") == "unmatched"


def test_every_documented_route_has_its_template(client: TestClient) -> None:
    """The templates are read off the routes (included routers walked), not off the
    OpenAPI document, which costs most of an application's start: every documented path
    is among them, and a request to each is labelled with it."""
    app = client.app
    templates = RouteTemplates.of(app.router.routes)  # type: ignore[attr-defined]
    documented = app.openapi()["paths"]  # type: ignore[attr-defined]
    assert len(documented) > 50
    for path in documented:
        concrete = path.replace("{", "").replace("}", "")
        assert templates.template(concrete) == path, path


def test_workers_process_series_carry_their_pid(tmp_path: Path) -> None:
    gone = next(pid for pid in range(4_000_000, 3_000_000, -1) if not Path(f"/proc/{pid}").exists())
    (tmp_path / f"counter_{os.getpid()}.db").touch()
    (tmp_path / f"histogram_{gone}.db").touch()  # a worker that died
    assert worker_pids(str(tmp_path)) == [os.getpid()]
    metrics = {m.name: m for m in WorkerProcesses(str(tmp_path)).collect()}
    cpu = metrics["process_cpu_seconds"].samples
    assert [s.labels for s in cpu] == [{"pid": str(os.getpid())}]
    assert cpu[0].value > 0
