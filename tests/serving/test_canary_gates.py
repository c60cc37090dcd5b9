"""A canary deployment's API body: since when it is at its step, and the judge's gates
with what they observed on this step's traffic and the limits they hold it to."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from modelport.serving.endpoints.rollout import Verdict, gates, judge
from modelport.serving.endpoints.types import CanaryPolicy, Stats
from tests.serving.conftest import Serving, add_constant, failing
from tests.serving.test_canary import halted, start_canary, traffic, wait_sleeping


def gates_of(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {g["name"]: g for g in body["rollout"]["gates"]}


def test_the_gates_show_what_the_judge_sees_and_since_moves_with_the_step(
    serving: Serving,
) -> None:
    deployment = start_canary(serving, add_constant(1.0, "same"), max_p99_increase=100.0)
    ident = deployment["id"]
    assert deployment["rollout"]["since"] == deployment["activated_at"]
    waiting = gates_of(deployment)
    assert waiting["requests"] == {
        "name": "requests", "observed": 0, "limit": 5, "passing": None,
    }  # fmt: skip
    assert waiting["error_rate"]["passing"] is None
    assert waiting["p99_latency_ms"]["limit"] is None  # no stable traffic to compare yet
    traffic(serving, 40)
    body = serving.deployment("fraud", ident)
    candidate = body["versions"][1]["traffic"]
    gates = gates_of(body)
    assert gates["requests"]["observed"] == candidate["requests"] >= 5
    assert gates["requests"]["passing"] is True
    assert gates["error_rate"] == {
        "name": "error_rate", "observed": 0.0, "limit": 0.05, "passing": True,
    }  # fmt: skip
    assert gates["p99_latency_ms"]["observed"] == candidate["latency_ms"]["p99"]
    assert gates["p99_latency_ms"]["passing"] is True
    serving.clock.advance(10)
    wait_sleeping(serving, 2)
    serving.clock.advance(50)
    done = serving.wait("fraud", ident, lambda d: d["rollout"]["status"] == "complete")
    moved = datetime.fromisoformat(done["rollout"]["since"])
    assert moved == serving.clock.now()  # stamped by the move, on the services' clock
    assert moved > datetime.fromisoformat(deployment["rollout"]["since"])


def test_a_halted_canary_shows_the_gate_it_failed(serving: Serving) -> None:
    deployment = start_canary(serving, failing())
    traffic(serving, 40)
    body = halted(serving, deployment["id"])
    gate = gates_of(body)["error_rate"]
    assert gate["observed"] == 1.0 and gate["passing"] is False
    assert body["rollout"]["since"] > deployment["rollout"]["since"]


def test_a_manual_deployment_has_no_gates(serving: Serving) -> None:
    v1 = serving.publish("acme/fraud", "1")
    serving.endpoint("fraud")
    body = serving.deploy("fraud", [(v1, 100)])
    assert "gates" not in body["rollout"]
    assert body["rollout"]["since"] == body["activated_at"]


def test_the_gates_agree_with_the_judges_verdict() -> None:
    policy = CanaryPolicy(min_requests=10, max_error_rate_increase=0.05, max_p99_increase=0.5)
    stables = [Stats(), Stats(40, 0, 0.01, 0.02), Stats(40, 4, 0.01, 0.02), Stats(40, 40)]
    candidates = [
        Stats(requests, errors, 0.01, p99)
        for requests in (0, 9, 10, 50)
        for errors in (0, 1, 5, requests)
        for p99 in (0.001, 0.03, 0.05)
        if errors <= requests
    ]
    for stable in stables:
        for candidate in candidates:
            verdict = judge(policy, stable, candidate).verdict
            found = {g.name: g.passing for g in gates(policy, stable, candidate)}
            if verdict is Verdict.WAIT:
                assert found["requests"] is None, (stable, candidate)
            elif verdict is Verdict.BAD:
                assert False in found.values(), (stable, candidate, found)
            else:
                assert False not in found.values() and found["requests"], (stable, candidate)
