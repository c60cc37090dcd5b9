"""Prometheus metrics fed by a real host: requests, batches, queue, loads, memory."""

from __future__ import annotations

import asyncio
import time

import numpy as np
import pytest

from modelport.errors import DeadlineExceeded
from modelport.observability.metrics import RuntimeMetrics, render
from modelport.runtime.types import Priority, VersionKey
from tests.runtime.conftest import DictBlobSource, FakeFormat, HostFactory, mlp_manifest


def sample(metrics: RuntimeMetrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def test_host_activity_shows_in_the_metrics(make_host: HostFactory, source: DictBlobSource) -> None:
    metrics = RuntimeMetrics()
    host = make_host(observer=metrics)
    manifest, digest = mlp_manifest(source, resources={"max_batch_size": 32})
    key = VersionKey("acme/mlp", "7", digest)
    labels = {"model": "acme/mlp", "version": "7"}

    async def scenario() -> None:
        await host.ensure_loaded(key, manifest, source)
        deadline = time.monotonic() + 10
        rows = [np.ones((1, 8), np.float32)] * 20
        await asyncio.gather(*(host.infer(key, {"features": r}, deadline=deadline) for r in rows))

    asyncio.run(scenario())
    assert sample(metrics, "modelport_inference_requests_total", outcome="success", **labels) == 20
    assert sample(metrics, "modelport_inference_request_duration_seconds_count", **labels) == 20
    assert sample(metrics, "modelport_inference_queue_duration_seconds_count", **labels) == 20
    assert sample(metrics, "modelport_inference_batch_size_sum", **labels) == 20
    batches = sample(metrics, "modelport_inference_batch_size_count", **labels)
    assert batches is not None and 1 <= batches < 20  # concurrent rows were merged
    assert sample(metrics, "modelport_inference_execution_duration_seconds_count", **labels) == (
        batches
    )
    assert sample(metrics, "modelport_inference_queue_depth", **labels) == 0
    assert sample(metrics, "modelport_model_cold_starts_total", **labels) == 1
    for phase in ("fetch", "verify", "load", "warmup"):
        count = sample(
            metrics, "modelport_model_load_phase_duration_seconds_count", phase=phase, **labels
        )
        assert count == 1
    host_bytes = sample(metrics, "modelport_model_memory_bytes", memory="host", **labels)
    assert host_bytes is not None and host_bytes >= manifest.files[0].size

    host.unload(key)
    assert sample(metrics, "modelport_model_memory_bytes", memory="host", **labels) == 0
    text = render(metrics.registry).decode()
    assert 'modelport_inference_requests_total{model="acme/mlp",outcome="success",version="7"}' in (
        text
    )


def test_requests_queued_are_counted_per_class(
    make_host: HostFactory, source: DictBlobSource
) -> None:
    metrics = RuntimeMetrics()
    host = make_host(observer=metrics)
    manifest, digest = mlp_manifest(source, resources={"max_batch_size": 32})
    key = VersionKey("acme/mlp", "7", digest)
    labels = {"model": "acme/mlp", "version": "7"}
    classes = {Priority.INTERACTIVE: 3, Priority.BATCH: 2, Priority.OFFLINE: 4}

    async def scenario() -> None:
        await host.ensure_loaded(key, manifest, source)
        deadline = time.monotonic() + 10
        row = np.ones((1, 8), np.float32)
        await asyncio.gather(
            *(
                host.infer(key, {"features": row}, deadline=deadline, priority=priority)
                for priority, count in classes.items()
                for _ in range(count)
            )
        )

    asyncio.run(scenario())
    for priority, count in classes.items():
        name = "modelport_inference_queued_requests_total"
        assert sample(metrics, name, priority=priority.value, **labels) == count
    text = render(metrics.registry).decode()
    assert (
        'modelport_inference_queued_requests_total{model="acme/mlp",priority="offline",'
        'version="7"} 4.0'
    ) in text


def test_deadline_drops_are_counted(
    make_host: HostFactory, source: DictBlobSource, fake_format: FakeFormat
) -> None:
    from tests.runtime.conftest import fake_manifest

    metrics = RuntimeMetrics()
    host = make_host(observer=metrics)
    manifest, digest = fake_manifest(source)
    key = VersionKey("acme/fake", "1", digest)
    host.load(key, manifest, source)
    model = fake_format.models[0]
    model.gate.clear()

    async def scenario() -> None:
        busy = asyncio.ensure_future(
            host.infer(key, {"x": np.zeros((1, 4), np.float32)}, deadline=time.monotonic() + 5)
        )
        while not model.started.is_set():
            await asyncio.sleep(0.001)
        with pytest.raises(DeadlineExceeded):
            await host.infer(
                key, {"x": np.zeros((1, 4), np.float32)}, deadline=time.monotonic() + 0.02
            )
        model.gate.set()
        await busy

    asyncio.run(scenario())
    labels = {"model": "acme/fake", "version": "1"}
    assert (
        sample(metrics, "modelport_inference_requests_total", outcome="deadline_exceeded", **labels)
        == 1
    )
    assert model.executions == [1]


def test_two_instances_do_not_share_series() -> None:
    a, b = RuntimeMetrics(), RuntimeMetrics()
    a.version("o/m", "1").request_done("success", 0.01)
    assert (
        sample(a, "modelport_inference_requests_total", model="o/m", version="1", outcome="success")
        == 1
    )
    assert (
        sample(b, "modelport_inference_requests_total", model="o/m", version="1", outcome="success")
        is None
    )
    assert a.version("o/m", "1") is a.version("o/m", "1")
