"""``/metrics`` with several worker processes: real processes share a metrics folder
(prometheus_client's multiprocess mode, chosen at import) and any one of them renders the
sum; a worker that died stops counting in the ``live*`` gauges once ``prepare_worker`` ran."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from modelport.observability.metrics import RuntimeMetrics, render
from modelport.observability.multiprocess import ENV, multiprocess_dir, prepare_worker
from tests.metrics_process import BACKEND, MODEL, VERSION

SCRIPT = Path(__file__).with_name("metrics_process.py")
LABELS = {"model": MODEL, "version": VERSION}
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]
PYTHON_INFO = {
    "implementation": platform.python_implementation(),
    "major": str(sys.version_info.major),
    "minor": str(sys.version_info.minor),
    "patchlevel": str(sys.version_info.micro),
    "version": platform.python_version(),
}


@pytest.fixture
def metrics_env(tmp_path: Path) -> dict[str, str]:
    folder = tmp_path / "metrics"
    folder.mkdir()
    return {**os.environ, ENV: str(folder)}


@pytest.fixture
def workers() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                stream.close()


def start_worker(
    env: dict[str, str], workers: list[subprocess.Popen[str]], **spec: Any
) -> subprocess.Popen[str]:
    """A live worker that recorded ``spec`` (see ``tests/metrics_process.py``)."""
    proc = subprocess.Popen(
        [sys.executable, str(SCRIPT), "record", json.dumps(spec)],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    workers.append(proc)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    return proc


def stop_worker(proc: subprocess.Popen[str]) -> None:
    assert proc.stdin is not None
    proc.stdin.close()
    assert proc.wait(timeout=30) == 0  # reaped: its pid is gone


def scrape(env: dict[str, str], *flags: str) -> tuple[list[int], Samples]:
    """Render in a fresh process: the pids it marked dead and the parsed samples."""
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "render", *flags],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    answer = json.loads(done.stdout)
    samples: Samples = {}
    for family in text_string_to_metric_families(answer["text"]):
        for s in family.samples:
            samples[(s.name, frozenset(s.labels.items()))] = s.value
    return answer["dead"], samples


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def live_files(env: dict[str, str], pid: int) -> list[str]:
    return sorted(p.name for p in Path(env[ENV]).glob(f"gauge_live*_{pid}.db"))


@pytest.mark.slow
def test_scrape_sums_workers_and_drops_dead_ones_from_live_gauges(
    metrics_env: dict[str, str], workers: list[subprocess.Popen[str]]
) -> None:
    a = start_worker(
        metrics_env, workers, requests=3, seconds=0.02, depth=2, host_bytes=100,
        breaker="open", up=True, log_depth=4,
    )  # fmt: skip
    b = start_worker(
        metrics_env, workers, requests=5, seconds=0.04, depth=5, host_bytes=200,
        breaker="closed", up=False, log_depth=1,
    )  # fmt: skip

    _, s = scrape(metrics_env)
    assert value(s, "modelport_inference_requests_total", outcome="success", **LABELS) == 8
    latency = "modelport_inference_request_duration_seconds"
    assert value(s, f"{latency}_count", **LABELS) == 8
    assert value(s, f"{latency}_sum", **LABELS) == pytest.approx(3 * 0.02 + 5 * 0.04)
    assert value(s, f"{latency}_bucket", le="0.01", **LABELS) == 0
    assert value(s, f"{latency}_bucket", le="0.025", **LABELS) == 3
    assert value(s, f"{latency}_bucket", le="0.05", **LABELS) == 8
    assert value(s, f"{latency}_bucket", le="+Inf", **LABELS) == 8
    assert value(s, "modelport_inference_queue_duration_seconds_count", **LABELS) == 8
    # livesum: the live workers' levels add up, with no pid label left
    assert value(s, "modelport_inference_queue_depth", **LABELS) == 7
    assert value(s, "modelport_model_memory_bytes", memory="host", **LABELS) == 300
    assert value(s, "modelport_prediction_log_buffer_depth") == 5
    # livemax: the worst worker's breaker; livemostrecent: the newest probe (b's)
    assert value(s, "modelport_serving_breaker_state", backend=BACKEND) == 2
    assert value(s, "modelport_serving_backend_up", backend=BACKEND) == 0
    gauges = [labels for name, labels in s if name.startswith("modelport_")]
    assert not any(("pid", str(a.pid)) in labels for labels in gauges)
    # Each live worker's process series, by pid (the aggregate has none of its own).
    cpu = {dict(labels)["pid"] for name, labels in s if name == "process_cpu_seconds_total"}
    assert {str(a.pid), str(b.pid)} <= cpu
    assert value(s, "python_info", **PYTHON_INFO) == 1

    stop_worker(a)
    _, s = scrape(metrics_env)
    # nobody marked it dead yet: its live gauges still count
    assert value(s, "modelport_inference_queue_depth", **LABELS) == 7

    dead, s = scrape(metrics_env, "--prepare")
    assert dead == [a.pid]
    assert live_files(metrics_env, a.pid) == []
    assert live_files(metrics_env, b.pid) != []  # alive: untouched
    # counters and histograms keep the dead worker's share (they never go down)
    assert value(s, "modelport_inference_requests_total", outcome="success", **LABELS) == 8
    assert value(s, f"{latency}_count", **LABELS) == 8
    # live gauges now show b alone
    assert value(s, "modelport_inference_queue_depth", **LABELS) == 5
    assert value(s, "modelport_model_memory_bytes", memory="host", **LABELS) == 200
    assert value(s, "modelport_prediction_log_buffer_depth") == 1
    assert value(s, "modelport_serving_breaker_state", backend=BACKEND) == 0
    assert value(s, "modelport_serving_backend_up", backend=BACKEND) == 0

    assert scrape(metrics_env, "--prepare")[0] == []  # already done
    stop_worker(b)


@pytest.mark.slow
def test_without_the_folder_a_process_renders_only_itself(
    metrics_env: dict[str, str], workers: list[subprocess.Popen[str]]
) -> None:
    start_worker(
        metrics_env, workers, requests=3, seconds=0.02, depth=2, host_bytes=100,
        breaker="open", up=True, log_depth=4,
    )  # fmt: skip
    alone = {k: v for k, v in metrics_env.items() if k != ENV}
    dead, s = scrape(alone, "--prepare")
    assert dead == []
    assert value(s, "modelport_inference_requests_total", outcome="success", **LABELS) is None
    assert value(s, "modelport_inference_queue_depth", **LABELS) is None


def test_render_is_the_registry_itself_outside_multiprocess_mode(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # This test process imported prometheus_client without the variable: values are in
    # memory, so even with the variable set now, a scrape shows this process's registry.
    for env in ({}, {ENV: str(tmp_path)}):
        monkeypatch.delenv(ENV, raising=False)
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        metrics = RuntimeMetrics()
        metrics.version(MODEL, VERSION).request_done("success", 0.01)
        assert multiprocess_dir() is None
        assert prepare_worker() == []
        assert render(metrics.registry) == generate_latest(metrics.registry)
        assert render(CollectorRegistry()) == b""


def scrape_until(env: dict[str, str], done: Any, timeout: float = 30.0) -> Samples:
    """Scrape until ``done(samples)`` holds (a liveness wait, not a timing check)."""
    deadline = time.monotonic() + timeout
    while True:
        _, s = scrape(env)
        if done(s) or time.monotonic() > deadline:
            return s
        time.sleep(0.1)


@pytest.mark.slow
def test_a_running_worker_folds_its_tallies_for_the_other_workers(
    metrics_env: dict[str, str], workers: list[subprocess.Popen[str]]
) -> None:
    # Recorded on a running event loop, then nothing more: no further recording call, no
    # memory report and no scrape in that worker. Only its fold timer (FOLD_INTERVAL)
    # brings the tallies to the shared files.
    start_worker(metrics_env, workers, requests=4, seconds=0.02, depth=3, loop=True)
    total = "modelport_inference_requests_total"
    s = scrape_until(metrics_env, lambda s: value(s, total, outcome="success", **LABELS) == 4)
    assert value(s, total, outcome="success", **LABELS) == 4
    latency = "modelport_inference_request_duration_seconds"
    assert value(s, f"{latency}_bucket", le="0.025", **LABELS) == 4
    assert value(s, f"{latency}_sum", **LABELS) == pytest.approx(4 * 0.02)
    assert value(s, "modelport_inference_queue_duration_seconds_count", **LABELS) == 4
    assert value(s, "modelport_inference_queue_depth", **LABELS) == 3


@pytest.mark.slow
def test_a_worker_folds_what_is_left_as_it_exits(
    metrics_env: dict[str, str], workers: list[subprocess.Popen[str]]
) -> None:
    # Off any event loop the first call folds at once and the rest waits for the interval,
    # which an exiting worker does not wait for.
    proc = start_worker(metrics_env, workers, requests=5, seconds=0.02, depth=2, memory=False)
    total = "modelport_inference_requests_total"
    _, s = scrape(metrics_env)
    assert 1 <= (value(s, total, outcome="success", **LABELS) or 0) <= 5
    stop_worker(proc)
    _, s = scrape(metrics_env)
    assert value(s, total, outcome="success", **LABELS) == 5
    assert value(s, "modelport_inference_queue_duration_seconds_count", **LABELS) == 5
    assert value(s, "modelport_inference_queue_depth", **LABELS) == 2  # not marked dead yet
