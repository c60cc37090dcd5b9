"""/v2 infer behind the limits: 429 with Retry-After and RateLimit-* headers, concurrency
refused at once and slots given back, budgets refused before any work."""

from __future__ import annotations

import threading
import time

import httpx
import numpy as np
import pytest

from modelport.runtime.formats.onnx import OnnxModel
from modelport.tenancy.limits import ScopeType
from tests.conftest import ADMIN_KEY, LiveServer
from tests.limits.conftest import ADDER_BODY, Platform, PlatformFactory, bearer

SLOTS = "slots:tenant:acme"


@pytest.fixture
def acme(platform: Platform) -> tuple[Platform, str]:
    """Tenant acme with a consumer key, and acme/adder published."""
    keys = platform.tenant("acme", ("app", ["consumer"]))
    platform.publisher.adder()
    return platform, keys["app"]


def test_rate_limit_headers_then_429_with_retry_after(acme: tuple[Platform, str]) -> None:
    platform, key = acme
    platform.limit(ScopeType.TENANT, "acme", rpm=3)
    for remaining in (2, 1, 0):
        ok = platform.infer(key)
        assert ok.status_code == 200, ok.text
        assert ok.headers["RateLimit-Limit"] == "3"
        assert ok.headers["RateLimit-Remaining"] == str(remaining)
        assert 0 < int(ok.headers["RateLimit-Reset"]) <= 60
    refused = platform.infer(key)
    assert refused.status_code == 429
    assert "rate limit of 3 requests per minute" in refused.json()["error"]
    assert refused.json()["code"] == "rate_limited"
    assert 19 <= int(refused.headers["Retry-After"]) <= 20  # one request every 20 s
    assert refused.headers["RateLimit-Remaining"] == "0"


def test_unlimited_calls_carry_no_rate_headers(acme: tuple[Platform, str]) -> None:
    platform, key = acme
    response = platform.infer(key)
    assert response.status_code == 200
    assert "RateLimit-Limit" not in response.headers


def test_key_limits_narrow_the_tenants(acme: tuple[Platform, str]) -> None:
    platform, key = acme
    other = platform.services.tenancy.create_key("acme", "app", name="other", actor="t").secret
    platform.limit(ScopeType.TENANT, "acme", rpm=5)
    platform.limit(ScopeType.KEY, platform.key_id(key), rpm=1)
    assert platform.infer(key).status_code == 200
    assert platform.infer(key).status_code == 429
    statuses = [platform.infer(other).status_code for _ in range(5)]
    assert statuses == [200, 200, 200, 200, 429]


def test_model_limit_set_by_its_publisher(acme: tuple[Platform, str]) -> None:
    platform, key = acme
    platform.publisher.adder("acme/second")
    platform.limit(ScopeType.MODEL, "acme/adder", rpm=1)
    assert platform.infer(key).status_code == 200
    refused = platform.infer(key)
    assert refused.status_code == 429 and "model acme/adder" in refused.json()["error"]
    assert platform.infer(key, model="acme/second").status_code == 200


def test_the_operator_is_limited_under_its_principal_id(acme: tuple[Platform, str]) -> None:
    platform, _ = acme
    platform.limit(ScopeType.TENANT, "admin", rpm=1)
    assert platform.client.post("/v2/models/acme/adder/infer", json=ADDER_BODY).status_code == 200
    assert platform.client.post("/v2/models/acme/adder/infer", json=ADDER_BODY).status_code == 429


def test_concurrency_refused_at_once_and_slot_back_after_success_and_error(
    acme: tuple[Platform, str],
) -> None:
    platform, key = acme
    platform.limit(ScopeType.TENANT, "acme", concurrency=1)
    limits = platform.services.limits
    principal = platform.services.authenticator.authenticate(key)
    from modelport.api.limiting import subject_of

    held = limits.admit(subject_of(principal, "acme/adder"))  # a call in flight
    started = time.monotonic()
    refused = platform.infer(key)
    assert refused.status_code == 429
    assert time.monotonic() - started < 1.0
    assert "concurrency limit of 1" in refused.json()["error"]
    assert refused.json()["code"] == "concurrency_limited"
    assert refused.headers["Retry-After"] == "1"
    held.release()
    assert platform.infer(key).status_code == 200
    assert limits.slots.in_use(SLOTS) == 0
    bad = platform.infer(
        key,
        json={"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 3], "data": [1, 2, 3]}]},
    )
    assert bad.status_code == 400
    assert limits.slots.in_use(SLOTS) == 0
    missing = platform.infer(key, model="acme/missing")
    assert missing.status_code == 404
    assert limits.slots.in_use(SLOTS) == 0
    assert platform.infer(key).status_code == 200


@pytest.fixture
def slow_live(make_platform: PlatformFactory):
    platform = make_platform()
    keys = platform.tenant("acme", ("app", ["consumer"]))
    platform.publisher.slow(n=1536)
    platform.limit(ScopeType.TENANT, "acme", concurrency=1)
    server = LiveServer(platform.services).start()
    load = httpx.post(
        f"{server.url}/v2/repository/models/acme/slow/load",
        json={},
        headers=bearer(ADMIN_KEY),
        timeout=60,
    )
    assert load.status_code == 200, load.text
    yield platform, server.url, keys["app"]
    server.stop()


def test_concurrent_calls_over_the_limit_are_refused_while_one_runs(
    slow_live, monkeypatch: pytest.MonkeyPatch
) -> None:
    platform, url, key = slow_live
    # The call that holds the slot waits at the gate: it runs for as long as the test
    # needs, however loaded the machine is.
    gate, executing = threading.Event(), threading.Event()
    execute = OnnxModel.execute

    def gated_execute(self: OnnxModel, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        executing.set()
        assert gate.wait(30), "the test never opened the gate"
        return execute(self, inputs)

    monkeypatch.setattr(OnnxModel, "execute", gated_execute)
    results: list[int] = []
    refused: list[int] = []
    barrier = threading.Barrier(3)

    def call(into: list[int], together: bool) -> None:
        if together:
            barrier.wait()
        response = httpx.post(
            f"{url}/v2/models/acme/slow/infer", json=ADDER_BODY, headers=bearer(key), timeout=60
        )
        into.append(response.status_code)

    running = threading.Thread(target=call, args=(results, False))
    others = [threading.Thread(target=call, args=(refused, True)) for _ in range(3)]
    running.start()
    try:
        assert executing.wait(30), "the first call never reached the model"
        for t in others:
            t.start()
        for t in others:
            t.join(60)
        # Answered while the first call still held its slot: refused at once, not queued.
        assert refused == [429, 429, 429]
    finally:
        gate.set()
        running.join(60)
    assert results == [200]
    assert platform.services.limits.slots.in_use(SLOTS) == 0


def test_slot_comes_back_when_the_client_goes_away(slow_live) -> None:
    platform, url, key = slow_live
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(
            f"{url}/v2/models/acme/slow/infer", json=ADDER_BODY, headers=bearer(key), timeout=0.005
        )
    # The abandoned call may be admitted after the client left (the server reads it late):
    # then its slot is held until its work ends. Calls are refused (429) while it is,
    # and answered once it comes back; a slot that never came back fails here.
    deadline = time.monotonic() + 30
    while True:
        ok = httpx.post(
            f"{url}/v2/models/acme/slow/infer", json=ADDER_BODY, headers=bearer(key), timeout=60
        )
        if ok.status_code != 429 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert ok.status_code == 200
    assert platform.services.limits.slots.in_use(SLOTS) == 0


def test_hard_cap_refuses_with_402_before_any_work(acme: tuple[Platform, str]) -> None:
    platform, key = acme
    platform.services.limits.set_budget("acme", hard_cap_micros=10, soft_cap_micros=None)
    platform.services.limits.add_spent("acme", 10)
    refused = platform.infer(key)
    assert refused.status_code == 402
    assert "spending cap" in refused.json()["error"]
    assert refused.json()["code"] == "budget_exceeded"
    # load_on_demand is on: any work at all would have loaded the model.
    assert platform.services.host.statuses() == []
    platform.services.limits.set_budget("acme", hard_cap_micros=11, soft_cap_micros=None)
    assert platform.infer(key).status_code == 200
    assert len(platform.services.host.statuses()) == 1


def test_soft_cap_records_one_alert_and_lets_calls_through(acme: tuple[Platform, str]) -> None:
    platform, key = acme
    limits = platform.services.limits
    limits.set_budget("acme", hard_cap_micros=None, soft_cap_micros=5)
    limits.add_spent("acme", 7)
    assert [platform.infer(key).status_code for _ in range(3)] == [200, 200, 200]
    alerts = limits.budget_alerts("acme")
    assert [(a.tenant, a.kind, a.spent_micros) for a in alerts] == [("acme", "soft_cap", 7)]
