"""One canary, several controllers: every process (worker or gateway) resumes a running
canary, each judges the traffic it serves, and each move is made once. A canary that
one process halted or completed is never moved again by another."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from tests.polling import eventually
from tests.serving.conftest import ROW, Serving, ServingFactory, add_constant, example

BAD_ROW = [[1.0, 2.0, 3.0, 3.0]]
"""Rows whose largest value is not 4: the flaky candidate fails on them."""


def flaky() -> onnx.ModelProto:
    """x [-1, 4] -> y = x, reshaped to [-1, max(x)]: fine for rows whose largest value
    is 4 (``ROW``), an execution error otherwise (4 values do not split into rows of 3)."""
    graph = helper.make_graph(
        [
            helper.make_node("ReduceMax", ["x"], ["top"], keepdims=1),
            helper.make_node("Reshape", ["top", "one"], ["flat"]),
            helper.make_node("Cast", ["flat"], ["width"], to=TensorProto.INT64),
            helper.make_node("Concat", ["rows", "width"], ["shape"], axis=0),
            helper.make_node("Reshape", ["x", "shape"], ["y"]),
        ],
        "flaky",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 4])],
        initializer=[
            numpy_helper.from_array(np.array([1], dtype=np.int64), "one"),
            numpy_helper.from_array(np.array([-1], dtype=np.int64), "rows"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def canary_task(serving: Serving, ident: int) -> Any:
    """The process's controller task that drives the canary of deployment ``ident``."""
    return serving.services.serving.controller._work["canary", "fraud", ident]


def canary_on_two(
    make_serving: ServingFactory,
    database_url: str,
    candidate: onnx.ModelProto,
    steps: list[int],
    **publish: Any,
) -> tuple[Serving, Serving, int]:
    """Process ``a`` starts a canary; process ``b``, on the same home and database (as
    ``serve --workers`` runs them), starts after it and resumes it: both drive it."""
    a = make_serving(database_url)
    v1 = a.publish("acme/fraud", "1")
    v2 = a.publish("acme/fraud", "2", model=candidate, **publish)
    a.endpoint("fraud")
    a.deploy("fraud", [(v1, 100)])
    rollout = {
        "policy": "canary",
        "steps": steps,
        "interval_seconds": 60,
        "check_seconds": 10,
        "min_requests": 5,
        # Latency is not what these tests are about (b may load a version on demand).
        "max_p99_increase": 100.0,
        "latency_slack_ms": 60_000.0,
    }
    deployment = a.deploy("fraud", [(v1, 0), (v2, 0)], rollout=rollout)
    assert deployment["rollout"]["status"] == "progressing"
    b = make_serving(database_url, home=a.services.settings.store.home)  # a worker beside it
    for process in (a, b):  # each: the canary's check and the old deployment's window
        assert eventually(lambda p=process: p.clock.parked == 2), "both controllers parked"
    return a, b, deployment["id"]


def calls(serving: Serving, n: int, rows: list[list[float]] = ROW) -> Counter[tuple[str, int]]:
    seen: Counter[tuple[str, int]] = Counter()
    for _ in range(n):
        response = serving.predict("fraud", {"inputs": {"x": rows}})
        version = response.json().get("model_version") if response.status_code == 200 else None
        seen[str(version), response.status_code] += 1
    return seen


def test_a_canary_another_process_completed_is_not_set_back(
    make_serving: ServingFactory, database_url: str
) -> None:
    a, b, ident = canary_on_two(
        make_serving, database_url, add_constant(1.0, "same"), [25, 50, 100]
    )
    assert calls(a, 80)["2", 200] >= 5  # a judges the candidate good too, at step 0
    for step in (1, 2):  # b moves the canary on, twice
        assert calls(b, 80)["2", 200] >= 5
        b.clock.advance(60)
        b.wait("fraud", ident, lambda d, s=step: d["rollout"]["step"] == s)
    assert b.deployment("fraud", ident)["rollout"]["status"] == "complete"

    a.clock.advance(60)  # a's step 0 is over too, judged good: it must follow, not move
    eventually(lambda: canary_task(a, ident).done(), 5)  # it follows, and ends
    body = a.deployment("fraud", ident)
    assert (body["rollout"]["status"], body["rollout"]["step"]) == ("complete", 2)
    assert [v["weight"] for v in body["versions"]] == [0, 100]
    assert set(calls(a, 10)) == {("2", 200)}
    assert canary_task(a, ident).done()  # a's canary task ended


def test_a_canary_halted_by_one_process_stays_halted(
    make_serving: ServingFactory, database_url: str
) -> None:
    a, b, ident = canary_on_two(
        make_serving, database_url, flaky(), [50, 100], examples=[example(0.0)]
    )
    bad = calls(a, 30, BAD_ROW)  # a's callers send rows the candidate fails on
    assert bad["None", 500] + bad["None", 503] >= 5 and bad["1", 200] >= 5, bad
    good = calls(b, 30)  # b's do not: b judges the candidate good
    assert good["2", 200] >= 5 and set(good) <= {("1", 200), ("2", 200)}, good

    a.clock.advance(10)
    halted = a.wait("fraud", ident, lambda d: d["rollout"]["status"] == "halted")
    assert [v["weight"] for v in halted["versions"]] == [100, 0]
    b.clock.advance(60)  # good on b's traffic, a step's time over: b must not move it
    eventually(lambda: canary_task(b, ident).done(), 5)  # it follows, and ends
    body = b.deployment("fraud", ident)
    assert body["rollout"]["status"] == "halted"
    assert "error rate" in body["rollout"]["reason"]
    assert [v["weight"] for v in body["versions"]] == [100, 0]
    assert calls(b, 10) == Counter({("1", 200): 10})  # b routes as the database says
    assert canary_task(b, ident).done()  # b's canary task ended


def test_the_controller_that_lost_a_move_follows_and_drives_the_next(
    make_serving: ServingFactory, database_url: str
) -> None:
    a, b, ident = canary_on_two(
        make_serving, database_url, add_constant(1.0, "same"), [25, 50, 100]
    )
    for process in (a, b):
        assert calls(process, 80)["2", 200] >= 5
    a.clock.advance(60)
    b.clock.advance(60)  # both judge step 0 good at once: one of them moves it
    moved = a.wait("fraud", ident, lambda d: d["rollout"]["step"] == 1)
    assert moved["rollout"]["status"] == "progressing"
    assert [v["weight"] for v in moved["versions"]] == [50, 50]
    assert eventually(lambda: b.clock.parked == 2)  # b followed the move, and waits again
    assert not canary_task(b, ident).done()  # b's canary task goes on
    assert calls(b, 40)["2", 200] >= 5  # b, whichever it was, drives the next step
    b.clock.advance(60)
    done = b.wait("fraud", ident, lambda d: d["rollout"]["status"] == "complete")
    assert [v["weight"] for v in done["versions"]] == [0, 100]
