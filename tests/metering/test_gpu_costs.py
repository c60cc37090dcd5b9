"""GPU time in the cost of a call: a model that measures its device's time (a
``DeviceTimedModel``, as a ``transformers`` model on CUDA is) has it carried from the
executor through the batcher, the local backend and the call's usage to the ledger's
``gpu_ms``, priced per GPU-second and the rest per core-second, in ``/api/costs`` and
the cost metrics. On the CPU the GPU share is zero. No GPU here: the model reports a
fixed fraction of its execution as GPU time, which is what the accounting is tested on."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

from modelport.inference.steps.record import measure
from modelport.metering.types import BalanceScope
from modelport.observability.metrics import render
from modelport.runtime.executor import BatchOutcome, ThreadExecutor
from modelport.runtime.formats.base import LoadedModel
from modelport.runtime.types import BatchingConfig
from modelport.serving.types import GPU_SECONDS
from tests.metering.conftest import Platform, make_platform

CORE_SECOND = 2000.0  # micros
GPU_SECOND = 50_000.0
GPU_PART = 0.75
"""The share of each batch's execution the model reports as its GPU's time."""


class GpuTimedModel:
    """A loaded model whose ``execute_timed`` reports ``GPU_PART`` of its time as the
    GPU's: the shape of what a CUDA-timed model gives the executor."""

    def __init__(self, inner: LoadedModel) -> None:
        self.inner = inner
        self.timed: list[float] = []

    def execute(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return self.inner.execute(inputs)

    def execute_timed(self, inputs: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], float]:
        import time

        started = time.perf_counter()
        outputs = self.inner.execute(inputs)
        gpu = (time.perf_counter() - started) * GPU_PART
        self.timed.append(gpu)
        return outputs, gpu

    def memory_bytes(self) -> int:
        return self.inner.memory_bytes()

    def unload(self) -> None:
        self.inner.unload()


class Doubler:
    def execute(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {"y": inputs["x"] * 2}

    def memory_bytes(self) -> int:
        return 0

    def unload(self) -> None:
        pass


def _run(model: LoadedModel) -> BatchOutcome:
    """One batch of two requests (5 rows) on a ``ThreadExecutor`` of ``model``."""
    executor = ThreadExecutor(model)
    done = threading.Event()
    outcomes: list[BatchOutcome | BaseException] = []

    def finished(outcome: BatchOutcome | BaseException) -> None:
        outcomes.append(outcome)
        done.set()

    executor.submit(
        [{"x": np.ones((2, 1), np.float32)}, {"x": np.ones((3, 1), np.float32)}], finished
    )
    assert done.wait(10)
    executor.close()
    [outcome] = outcomes
    assert isinstance(outcome, BatchOutcome) and outcome.rows == 5
    return outcome


def test_the_executor_hands_on_the_gpu_time_of_a_timed_model_and_none_otherwise() -> None:
    timed = GpuTimedModel(Doubler())
    assert _run(timed).gpu_seconds == timed.timed[0] > 0
    assert _run(Doubler()).gpu_seconds == 0.0


def test_a_calls_gpu_share_is_its_rows_part_of_the_batchs_gpu_time() -> None:
    inputs = {"x": np.ones((2, 4), np.float32)}
    usage = measure(inputs, {"execute": 0.010, GPU_SECONDS: 0.008}, 8, 0.0)
    assert usage.gpu_ms == pytest.approx(2.0)  # 2 rows of 8: a quarter of 8 ms
    assert usage.cpu_ms == pytest.approx(0.5)  # a quarter of the other 2 ms
    on_cpu = measure(inputs, {"execute": 0.010}, 8, 0.0)
    assert (on_cpu.cpu_ms, on_cpu.gpu_ms) == (pytest.approx(2.5), 0.0)


@pytest.fixture
def platform(tmp_path: Path, database_url: str) -> Platform:
    built = make_platform(
        tmp_path / "home",
        database_url,
        cost_per_core_second_micros=CORE_SECOND,
        cost_per_gpu_second_micros=GPU_SECOND,
    )
    yield built  # type: ignore[misc]
    built.close_client()
    built.services.close()


def test_gpu_time_is_carried_to_the_ledger_and_priced_per_gpu_second(platform: Platform) -> None:
    services = platform.services
    host = services.host
    wrapped: list[GpuTimedModel] = []

    def executor(model: LoadedModel, config: BatchingConfig, name: str) -> ThreadExecutor:
        wrapped.append(GpuTimedModel(model))
        return ThreadExecutor(wrapped[-1], instances=config.instances, name=name)

    key = host.find("acme/adder", "1")
    if key is not None:  # loaded by the seeding: load it again through the timed model
        host.unload(key)
    host._executor_factory = executor
    services.metering.balances.credit(BalanceScope.TENANT, "beta", 10**9, tenant="beta")
    platform.price(100)
    body = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [2, 4], "data": [1.0] * 8}]}
    for _ in range(5):
        assert platform.infer(json=body).status_code == 200
    if services.metering.journal is not None:
        assert services.metering.journal.flush()
    platform.entries()
    [model] = wrapped
    gpu_seconds = sum(model.timed)
    assert gpu_seconds > 0

    text = render(services.metrics.registry).decode()
    seen = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    executed = seen[
        (
            "modelport_inference_execution_duration_seconds_sum",
            (("model", "acme/adder"), ("version", "1")),
        )
    ]
    who = (("model", "acme/adder"), ("tenant", "beta"))
    gpu = seen[("modelport_compute_seconds_total", (("device", "gpu"), *who))]
    cpu = seen[("modelport_compute_seconds_total", (("device", "cpu"), *who))]
    assert gpu == pytest.approx(gpu_seconds, rel=1e-6)
    assert cpu + gpu == pytest.approx(executed, rel=1e-6)
    cost = cpu * CORE_SECOND + gpu * GPU_SECOND
    assert seen[("modelport_compute_cost_micros_total", who)] == pytest.approx(cost, rel=1e-6)

    report = platform.client.get("/api/costs").json()
    assert report["prices"] == {"core_second_micros": CORE_SECOND, "gpu_second_micros": GPU_SECOND}
    [line] = report["items"]
    assert line["calls"] == 5
    assert line["gpu_ms"] == pytest.approx(gpu_seconds * 1000, abs=1e-2)
    assert line["compute_ms"] == pytest.approx(executed * 1000, abs=1e-2)
    assert line["cost_micros"] == pytest.approx(cost, abs=1e-2)
