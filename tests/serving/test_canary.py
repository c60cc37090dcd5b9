"""Staged canary rollouts driven by a manual clock: a good candidate goes 50 → 100; an
erroring or slow one is halted and all traffic returns to the stable version."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import onnx
import pytest

from tests.serving.conftest import Serving, add_constant, before_executions_of, failing, slow

MIN_REQUESTS = 5
CANARY = {
    "policy": "canary",
    "steps": [50, 100],
    "interval_seconds": 60,
    "check_seconds": 10,
    "min_requests": MIN_REQUESTS,
}


def wait_sleeping(serving: Serving, sleepers: int) -> None:
    """Until the controller's clock waits number ``sleepers`` (canary check, window)."""
    deadline = time.monotonic() + 30
    while serving.clock.sleepers != sleepers:
        assert time.monotonic() < deadline, serving.clock.sleepers
        time.sleep(0.005)


def start_canary(serving: Serving, candidate: onnx.ModelProto, **policy: Any) -> dict[str, Any]:
    v1 = serving.publish("acme/fraud", "1")
    v2 = serving.publish("acme/fraud", "2", model=candidate)
    serving.endpoint("fraud")
    serving.deploy("fraud", [(v1, 100)])
    deployment = serving.deploy("fraud", [(v1, 0), (v2, 0)], rollout={**CANARY, **policy})
    assert deployment["state"] == "active"
    assert [v["weight"] for v in deployment["versions"]] == [50, 50]
    assert deployment["rollout"]["status"] == "progressing"
    wait_sleeping(serving, 2)  # the canary's check, and the old deployment's rollback window
    return deployment


def traffic(serving: Serving, n: int) -> Counter[tuple[str, int]]:
    seen: Counter[tuple[str, int]] = Counter()
    for _ in range(n):
        response = serving.predict("fraud")
        version = response.json().get("model_version") if response.status_code == 200 else None
        seen[str(version), response.status_code] += 1
    return seen


def test_a_good_candidate_moves_through_the_steps(serving: Serving) -> None:
    # Latency is not what this test is about: a loaded test machine has spikes.
    deployment = start_canary(serving, add_constant(1.0, "same"), max_p99_increase=100.0)
    ident = deployment["id"]
    seen = traffic(serving, 40)
    assert {status for _, status in seen} == {200}
    serving.clock.advance(10)  # judged good, but the step lasts 60 s
    wait_sleeping(serving, 2)
    assert serving.deployment("fraud", ident)["rollout"]["step"] == 0
    serving.clock.advance(50)
    done = serving.wait("fraud", ident, lambda d: d["rollout"]["status"] == "complete")
    assert [v["weight"] for v in done["versions"]] == [0, 100]
    assert {serving.predict("fraud").json()["model_version"] for _ in range(20)} == {"2"}


def test_a_candidate_with_too_few_requests_is_not_promoted(serving: Serving) -> None:
    deployment = start_canary(serving, add_constant(1.0, "same"), min_requests=1000)
    traffic(serving, 10)
    serving.clock.advance(60)
    wait_sleeping(serving, 2)
    body = serving.deployment("fraud", deployment["id"])
    assert body["rollout"]["status"] == "progressing"
    assert [v["weight"] for v in body["versions"]] == [50, 50]


def halted(serving: Serving, ident: int) -> dict[str, Any]:
    serving.clock.advance(10)
    return serving.wait("fraud", ident, lambda d: d["rollout"]["status"] == "halted")


def test_an_erroring_candidate_is_halted_and_rolled_back(serving: Serving) -> None:
    deployment = start_canary(serving, failing())
    seen = traffic(serving, 40)
    # 500 from the model, then 503 once its own circuit breaker opened; never the stable's.
    failed = seen["None", 500] + seen["None", 503]
    assert seen["None", 500] >= 1 and seen["1", 200] > 5 and failed + seen["1", 200] == 40, seen
    body = halted(serving, deployment["id"])
    assert [v["weight"] for v in body["versions"]] == [100, 0]
    assert "error rate" in body["rollout"]["reason"]
    candidate = body["versions"][1]["traffic"]
    assert candidate["errors"] == candidate["requests"] == failed
    assert traffic(serving, 30) == Counter({("1", 200): 30})


def test_a_slow_candidate_is_halted(serving: Serving, monkeypatch: pytest.MonkeyPatch) -> None:
    # At least half a second a call: the stable's p99 would have to pass a third of a
    # second (a stall a loaded machine does not give a 1 ms call) for it to look as slow.
    before_executions_of(monkeypatch, "slow", lambda: time.sleep(0.5))
    deployment = start_canary(serving, slow(8))
    # Each of its calls costs half a second: only as many as the judge needs, more
    # than min_requests from each version (the split is random).
    seen: Counter[tuple[str, int]] = Counter()
    while min(seen["1", 200], seen["2", 200]) <= MIN_REQUESTS:
        seen += traffic(serving, 1)
        assert {status for _, status in seen} == {200}
    body = halted(serving, deployment["id"])
    assert "p99 latency" in body["rollout"]["reason"]
    stable, candidate = (v["traffic"]["latency_ms"]["p99"] for v in body["versions"])
    assert candidate > 1.5 * stable
    assert traffic(serving, 10) == Counter({("1", 200): 10})


def test_a_rollback_stops_the_canary(serving: Serving) -> None:
    deployment = start_canary(serving, add_constant(1.0, "same"))
    response = serving.client.post(f"/api/endpoints/fraud/deployments/{deployment['id']}:rollback")
    assert response.status_code == 200
    traffic(serving, 20)
    serving.clock.advance(60)
    time.sleep(0.1)
    body = serving.deployment("fraud", deployment["id"])
    assert body["state"] == "rolled_back"
    assert body["rollout"]["status"] == "progressing"  # frozen where it was
    assert traffic(serving, 10) == Counter({("1", 200): 10})
