"""Shadow traffic: the shadow version gets copies off the request path; its answers are
compared and recorded, never returned and never billed; at its bound, copies are dropped."""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

import pytest

from tests.serving.conftest import (
    Serving,
    ServingFactory,
    add_constant,
    before_executions_of,
    failing,
    slow,
)


def shadowed(serving: Serving, shadow_model: Any) -> dict[str, Any]:
    v1 = serving.publish("acme/fraud", "1")
    serving.publish("acme/fraud", "9", model=shadow_model)
    serving.endpoint("fraud")
    deployment = serving.deploy(
        "fraud", [(v1, 100)], shadow={"model": "acme/fraud", "version": "9"}
    )
    assert deployment["state"] == "active", deployment
    assert deployment["shadow"]["state"] == "ready", deployment
    return deployment


def comparison(serving: Serving, ident: int, settled: int) -> dict[str, Any]:
    """The shadow's comparison once ``settled`` copies were answered or dropped."""
    body = serving.wait(
        "fraud",
        ident,
        lambda d: (
            d["shadow"]["comparison"]["requests"] + d["shadow"]["comparison"]["dropped"] >= settled
        ),
    )
    return body["shadow"]["comparison"]


def billed_versions(serving: Serving) -> Counter[str]:
    serving.services.metering.deliver()
    entries = serving.services.metering.ledger.entries()
    return Counter(
        f"{e.event.model}:{e.event.version}" for e in entries if e.event.unit == "prediction"
    )


def test_the_shadow_is_compared_never_returned_never_billed(serving: Serving) -> None:
    deployment = shadowed(serving, add_constant(5.0))
    for _ in range(20):
        answer = serving.predict("fraud").json()
        assert answer["model_version"] == "1"
        assert answer["outputs"] == {"y": [[2.0, 3.0, 4.0, 5.0]]}  # the primary's x + 1
    seen = comparison(serving, deployment["id"], 20)
    assert seen["requests"] == 20 and seen["dropped"] == 0 and seen["errors"] == 0
    assert seen["disagreements"] == 20 and seen["disagreement_rate"] == 1.0
    assert "max |difference| 4" in seen["recent"][-1]["detail"]
    assert seen["latency_ms"]["p99"] > 0 and seen["primary_latency_ms"]["p99"] > 0
    assert billed_versions(serving) == Counter({"acme/fraud:1": 20})


def test_an_identical_shadow_agrees(serving: Serving) -> None:
    from tests.models import add_one

    deployment = shadowed(serving, add_one())
    for n in range(1, 11):
        response = serving.predict("fraud")
        assert response.status_code == 200, response.text
        # Each copy settles before the next call: none is ever beyond the in-flight
        # bound (on a loaded machine, ten copies at once could be, and one dropped).
        seen = comparison(serving, deployment["id"], n)
    assert seen["disagreements"] == 0 and seen["requests"] == 10
    assert all(r["agreed"] for r in seen["recent"])


def test_a_failing_shadow_never_fails_the_caller(serving: Serving) -> None:
    deployment = shadowed(serving, failing())
    for n in range(1, 11):
        assert serving.predict("fraud").status_code == 200
        seen = comparison(serving, deployment["id"], n)  # as above: none dropped
    assert seen["errors"] == 10
    assert seen["recent"][-1]["agreed"] is None


def test_copies_beyond_the_bound_are_dropped_and_counted(
    make_serving: ServingFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    serving = make_serving(serving_shadow_max_in_flight=1)
    # The shadow's first copy waits at the gate: it is in flight for as long as the
    # test needs, whatever the machine's load, so every later copy is beyond the bound.
    gate, executing = threading.Event(), threading.Event()

    def held() -> None:
        executing.set()
        assert gate.wait(30), "the test never opened the gate"

    before_executions_of(monkeypatch, "slow", held)
    deployment = shadowed(serving, slow(8))
    n = 24
    statuses: list[int] = []

    def call() -> None:
        statuses.append(serving.predict("fraud").status_code)

    threads = [threading.Thread(target=call) for _ in range(n - 1)]
    try:
        call()
        assert executing.wait(30), "the first copy never reached the shadow"
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert statuses == [200] * n  # the callers never wait for the shadow
        serving.wait(
            "fraud",
            deployment["id"],
            lambda d: d["shadow"]["comparison"]["dropped"] >= n - 1,
        )
    finally:
        gate.set()
    seen = comparison(serving, deployment["id"], n)
    assert seen["dropped"] > 0
    assert seen["requests"] + seen["dropped"] == n


def test_shadow_answers_go_to_the_prediction_log(make_serving: ServingFactory) -> None:
    serving = make_serving(prediction_log_flush_interval_seconds=0.05)
    shadowed(serving, add_constant(5.0))
    ids = [serving.predict("fraud").json()["prediction_id"] for _ in range(3)]
    store = serving.services.outcomes.predictions
    deadline = time.monotonic() + 60
    while len(logged := store.list(endpoint="fraud")) < 6:
        assert time.monotonic() < deadline, logged
        time.sleep(0.02)
    shadows = {p.shadow_of: p for p in logged if p.shadow_of is not None}
    assert set(shadows) == set(ids)
    assert {(p.version, p.arm, p.status) for p in shadows.values()} == {("9", "shadow", "ok")}
    primaries = [p for p in logged if p.shadow_of is None]
    assert {(p.id, p.version, p.arm) for p in primaries} == {(i, "1", "stable") for i in ids}
