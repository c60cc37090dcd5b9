"""Degradation under a load that would otherwise miss the interactive SLO, on ``/v2``
with real ONNX models in this process's runtime: ``acme/big`` (y = x + 1) runs one
request at a time behind a gate the test opens one execution at a time, so the load is
counted in executions, not seconds; ``acme/small`` (y = x + 100) is its cheaper
fallback. Each round, three batch calls then one interactive call arrive, and one
execution of big ends.

Without degradation the batch calls fill big's queue (4 requests): from the second
round the interactive calls are refused (503 ``queue_full``), missing any SLO. With it,
the batch calls that find big's predicted queue wait past the threshold (anything
queued) are served by small at once, and every interactive call is answered by big
after at most the one execution in flight and its own (the SLO here: 2 executions).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace

import httpx
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from modelport.app import Services
from modelport.runtime.formats.onnx import OnnxModel
from modelport.runtime.types import VersionKey
from tests.api_v2.conftest import Publisher, V2Factory
from tests.conftest import ADMIN_KEY, LiveServer
from tests.polling import eventually

IO = {
    "inputs": [{"name": "x", "datatype": "FP32", "shape": [-1, 4]}],
    "outputs": [{"name": "y", "datatype": "FP32", "shape": [-1, 4]}],
}
ROUNDS = 4
SLO_EXECUTIONS = 2
"""An interactive call's latency bound, in executions of big: the one in flight, its own."""


def adder(graph: str, amount: float) -> onnx.ModelProto:
    add = helper.make_tensor("amount", TensorProto.FLOAT, [], [amount])
    model = helper.make_model(
        helper.make_graph(
            [helper.make_node("Add", ["x", "amount"], ["y"])],
            graph,
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 4])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 4])],
            initializer=[add],
        ),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    model.ir_version = 8
    return model


class Gate:
    """Holds each execution of big until the test lets one through; keeps their order."""

    def __init__(self) -> None:
        self.permits = threading.Semaphore(0)
        self.started: queue.Queue[int] = queue.Queue()
        self.order: list[int] = []

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        execute = OnnxModel.execute

        def gated(model: OnnxModel, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
            if model.session.get_modelmeta().graph_name == "big":
                ident = int(inputs["x"][0, 0])
                self.order.append(ident)
                self.started.put(ident)
                assert self.permits.acquire(timeout=30), "the test never let it through"
            return execute(model, inputs)

        monkeypatch.setattr(OnnxModel, "execute", gated)

    def reset(self) -> None:
        """Every execution let through since (once nothing runs): start afresh."""
        self.permits = threading.Semaphore(0)
        self.started = queue.Queue()
        self.order = []

    def next_started(self) -> int:
        return self.started.get(timeout=30)


@dataclass
class Load:
    url: str
    services: Services
    gate: Gate
    pool: ThreadPoolExecutor

    def submit(self, ident: int, priority: str) -> Future[httpx.Response]:
        body = {
            "inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [ident] * 4}],
            "parameters": {"priority": priority},
        }
        return self.pool.submit(
            httpx.post,
            f"{self.url}/v2/models/acme/big/infer",
            json=body,
            headers={"Authorization": f"Bearer {ADMIN_KEY}"},
            timeout=60,
        )

    def predicted_wait(self) -> float:
        host = self.services.host
        assert host is not None
        version = self.services.registry.get_version("acme", "big", "1")
        wait = host.predicted_wait(VersionKey("acme/big", "1", version.manifest_digest))
        return 0.0 if wait is None else wait

    def arrive(self, ident: int, priority: str) -> Future[httpx.Response]:
        """A call that has reached big's queue, or has been answered (or refused)."""
        before = self.predicted_wait()
        made = self.submit(ident, priority)
        assert eventually(lambda: made.done() or self.predicted_wait() > before, 30)
        return made


@pytest.fixture
def load(make_v2: V2Factory, monkeypatch: pytest.MonkeyPatch) -> Iterator[Load]:
    _, services, publisher = make_v2(
        lifespan=False,
        runtime_max_batch_size=1,
        runtime_max_queue_size=4,
        degrade_queue_wait_seconds=1e-6,  # anything queued ahead: load is counted, not timed
        degrade_fallbacks={"acme/big": "acme/small"},
    )
    publish(publisher)
    gate = Gate()
    gate.install(monkeypatch)
    server = LiveServer(services).start()
    pool = ThreadPoolExecutor(max_workers=4 * ROUNDS + 4)
    try:
        made = Load(server.url, services, gate, pool)
        taught = made.submit(0, "interactive")  # loads big and teaches its execution time
        assert gate.next_started() == 0
        gate.permits.release()
        assert taught.result().status_code == 200
        yield made
    finally:
        gate.permits.release(100)
        pool.shutdown()
        server.stop()


def publish(publisher: Publisher) -> None:
    publisher.publish("acme/big", "1", adder("big", 1.0), **IO)  # type: ignore[arg-type]
    publisher.publish("acme/small", "1", adder("small", 100.0), **IO)  # type: ignore[arg-type]


@dataclass
class Outcome:
    interactive: dict[int, httpx.Response]
    batch: dict[int, httpx.Response]
    order: list[int]


def run_rounds(load: Load) -> Outcome:
    """Interactive call 10 runs on big; then each round: batch calls 100r+1..3, the
    interactive call 10+r, and one execution of big ends."""
    gate = load.gate
    gate.reset()
    interactive = {10: load.submit(10, "interactive")}
    assert gate.next_started() == 10
    batch: dict[int, Future[httpx.Response]] = {}
    for r in range(1, ROUNDS + 1):
        for b in range(1, 4):
            batch[100 * r + b] = load.arrive(100 * r + b, "batch")
        interactive[10 + r] = load.arrive(10 + r, "interactive")
        gate.permits.release()  # the execution in flight ends; the next one starts
        gate.next_started()
    gate.permits.release(100)  # drain
    outcome = Outcome(
        {i: f.result() for i, f in interactive.items()},
        {i: f.result() for i, f in batch.items()},
        list(gate.order),
    )
    gate.reset()
    return outcome


def executions_waited(outcome: Outcome, ident: int) -> int:
    """Executions of big from the one in flight as interactive call ``ident`` arrived
    to its own: round r's arrived during the r-th execution (call 10's started at once)."""
    in_flight = max(ident - 10 - 1, 0)
    return outcome.order.index(ident) - in_flight + 1


def test_interactive_calls_keep_their_slo_while_batch_ones_are_degraded(load: Load) -> None:
    inference = load.services.inference
    wired = inference.degradation
    assert wired is not None
    # Without degradation: the batch calls queue on big and crowd the interactive ones out.
    inference.degradation = replace(wired, threshold_seconds=None)
    off = run_rounds(load)
    refused = [i for i, r in off.interactive.items() if r.status_code != 200]
    assert refused, ("the load never missed the interactive SLO without degradation", off.order)
    assert all("queue_full" in off.interactive[i].text for i in refused)
    assert all(r.json()["model_name"] == "acme/big" for r in off.batch.values() if r.is_success)

    # With it: the same load; batch calls that find big's queue busy go to small.
    inference.degradation = wired
    on = run_rounds(load)
    assert all(r.status_code == 200 for r in on.interactive.values()), [
        r.text for r in on.interactive.values()
    ]
    assert {r.json()["model_name"] for r in on.interactive.values()} == {"acme/big"}
    assert all(executions_waited(on, i) <= SLO_EXECUTIONS for i in on.interactive), on.order
    assert all(r.status_code == 200 for r in on.batch.values()), [r.text for r in on.batch.values()]
    served = {i: r.json()["model_name"] for i, r in on.batch.items()}
    degraded = [i for i, model in served.items() if model == "acme/small"]
    # Only the first batch call found big's queue empty (it waits there behind the
    # interactive ones); every later one found it busy and was answered by small.
    assert sorted(set(served) - set(degraded)) == [101]
    small = np.array(on.batch[degraded[0]].json()["outputs"][0]["data"])
    assert small.tolist() == [degraded[0] + 100.0] * 4
