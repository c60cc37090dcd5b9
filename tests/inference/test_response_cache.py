"""The response cache end to end over ``/v2`` (on SQLite and PostgreSQL): a deterministic
version's answer is reused, others never are; a no-cache tenant is neither answered from
nor stored in it; another tenant reuses an answer only when both opted in to sharing and
neither declared no-cache; a hit is billed as the price book says, marked in provenance,
the ``modelport-cache`` header and ``modelport_response_cache_total``.

Whether the model ran is counted at the ONNX executor itself."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import redis

from modelport.inference.types import Caller, InferenceRequest, ModelTarget
from modelport.manifest import TensorSpec
from modelport.metering.types import BalanceScope, Unit, UsageEvent
from modelport.runtime.formats.onnx import OnnxModel
from tests.conftest import skip_or_fail
from tests.metering.conftest import ADDER_BODY, Platform, approve, make_platform
from tests.polling import eventually

CACHED = "acme/adder/versions/2"
"""Declared deterministic."""
UNCACHED = "acme/adder/versions/1"
"""Not declared: never cached."""


class Executions:
    """Counts the model's executions."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        self._lock = threading.Lock()
        original = OnnxModel.execute

        def execute(model: OnnxModel, inputs: dict[str, Any]) -> Any:
            with self._lock:
                self.count += 1
            return original(model, inputs)

        monkeypatch.setattr(OnnxModel, "execute", execute)


@pytest.fixture
def platform(tmp_path: Path, database_url: str) -> Iterator[Platform]:
    """acme/adder 1 (not deterministic) and 2 (deterministic), public and approved;
    tenants beta and gamma with consumer keys. Tenants' flags are cached for an hour:
    only the change event can refresh them within a test."""
    built = make_platform(tmp_path / "home", database_url, resolve_cache_ttl_seconds=3600)
    built.publisher.adder(version="2", runtime={"deterministic": True})
    approve(built.services, "acme", "adder", "2")
    tenancy = built.services.tenancy
    tenancy.create_tenant("gamma", actor="admin")
    tenancy.add_member("gamma", "app", roles=["consumer"], actor="admin")
    tenancy.add_member("beta", "boss", roles=["owner"], actor="admin")
    yield built
    built.close_client()
    built.services.close()


@pytest.fixture
def executions(platform: Platform, monkeypatch: pytest.MonkeyPatch) -> Executions:
    # Warm both versions first (their load runs the example): only calls count from here.
    for model in (CACHED, UNCACHED):
        assert platform.infer(model=model, json=_body(0)).status_code == 200
    platform.services.inference.cache.memory.clear()  # type: ignore[union-attr]
    return Executions(monkeypatch)


def _body(seed: float, **extra: Any) -> dict[str, Any]:
    data = [seed, seed + 1, seed + 2, seed + 3]
    return {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": data}], **extra}


def _rows(seed: float, n: int) -> dict[str, Any]:
    """A request of ``n`` rows."""
    data = [seed + i for i in range(4 * n)]
    return {"inputs": [{"name": "x", "datatype": "FP32", "shape": [n, 4], "data": data}]}


def key_of(platform: Platform, tenant: str) -> str:
    return platform.services.tenancy.create_key(tenant, "app", name="t", actor="admin").secret


def set_flags(platform: Platform, tenant: str, **flags: bool) -> dict[str, Any]:
    response = platform.client.patch(f"/api/tenants/{tenant}", json=flags)
    assert response.status_code == 200, response.text
    return dict(response.json())


def call(platform: Platform, key: str, model: str = CACHED, **extra: Any) -> tuple[str | None, Any]:
    """(the modelport-cache header, the outputs) of one call of ``model``."""
    response = platform.infer(key, model=model, **extra)
    assert response.status_code == 200, response.text
    return response.headers.get("modelport-cache"), response.json()["outputs"]


def metric(platform: Platform, result: str) -> float:
    text = platform.client.get("/metrics").text
    line = f'modelport_response_cache_total{{result="{result}"}} '
    found = [row for row in text.splitlines() if row.startswith(line)]
    return float(found[0].split()[-1]) if found else 0.0


def test_a_deterministic_version_is_answered_from_the_cache_on_a_repeat(
    platform: Platform, executions: Executions
) -> None:
    hits, misses = metric(platform, "hit"), metric(platform, "miss")
    first = call(platform, platform.key, json=_body(10))
    second = call(platform, platform.key, json=_body(10))
    assert first[0] == "miss" and second[0] == "hit"
    assert second[1] == first[1]
    assert first[1][0]["data"] == [11.0, 12.0, 13.0, 14.0]
    assert executions.count == 1  # the repeat never reached the model
    assert (metric(platform, "hit"), metric(platform, "miss")) == (hits + 1, misses + 1)


def test_a_version_not_declared_deterministic_is_never_cached(
    platform: Platform, executions: Executions
) -> None:
    before = metric(platform, "miss")
    for _ in range(3):
        header, outputs = call(platform, platform.key, model=UNCACHED, json=_body(20))
        assert header is None and outputs[0]["data"] == [21.0, 22.0, 23.0, 24.0]
    assert executions.count == 3
    assert metric(platform, "miss") == before  # not even looked up
    assert len(platform.services.inference.cache.memory) == 0  # type: ignore[union-attr]


def test_another_input_parameters_or_outputs_asked_are_another_question(
    platform: Platform, executions: Executions
) -> None:
    assert call(platform, platform.key, json=_body(30))[0] == "miss"
    assert call(platform, platform.key, json=_body(31))[0] == "miss"
    assert call(platform, platform.key, json=_body(30, parameters={"mode": "b"}))[0] == "miss"
    # Scheduling parameters do not change the answer: the same question.
    assert call(platform, platform.key, json=_body(30, parameters={"priority": 1}))[0] == "hit"
    # /v2 picks the outputs asked for when it encodes the whole answer: the same question.
    header, outputs = call(platform, platform.key, json=_body(30, outputs=[{"name": "y"}]))
    assert header == "hit" and [o["name"] for o in outputs] == ["y"]
    assert executions.count == 3


def test_a_no_cache_tenant_is_neither_answered_from_nor_stored_in_the_cache(
    platform: Platform, executions: Executions
) -> None:
    assert call(platform, platform.key, json=_body(40))[0] == "miss"
    assert call(platform, platform.key, json=_body(40))[0] == "hit"  # flags now cached here
    assert set_flags(platform, "beta", no_cache=True)["no_cache"] is True
    cache = platform.services.inference.cache
    assert cache is not None
    stored = len(cache.memory)
    bypass = metric(platform, "bypass")
    for seed in (40, 41, 41):
        header, _ = call(platform, platform.key, json=_body(seed))
        assert header is None
    assert executions.count == 1 + 3  # every call ran, the one cached before included
    assert len(cache.memory) == stored  # nothing written
    assert metric(platform, "bypass") == bypass + 3
    set_flags(platform, "beta", no_cache=False)
    assert call(platform, platform.key, json=_body(40))[0] == "hit"


def test_tenants_share_answers_only_when_both_opted_in(
    platform: Platform, executions: Executions
) -> None:
    gamma = key_of(platform, "gamma")
    assert call(platform, platform.key, json=_body(50))[0] == "miss"
    assert call(platform, gamma, json=_body(50))[0] == "miss"  # neither shares: its own
    assert executions.count == 2

    set_flags(platform, "beta", shared_cache=True)
    assert call(platform, platform.key, json=_body(51))[0] == "miss"  # into the shared scope
    assert call(platform, gamma, json=_body(51))[0] == "miss"  # gamma does not share
    set_flags(platform, "gamma", shared_cache=True)
    assert call(platform, gamma, json=_body(52))[0] == "miss"
    assert call(platform, platform.key, json=_body(52))[0] == "hit"  # gamma's answer, reused
    assert executions.count == 5


def test_a_shared_answer_is_not_reused_once_its_producer_declares_no_cache(
    platform: Platform, executions: Executions
) -> None:
    gamma = key_of(platform, "gamma")
    set_flags(platform, "beta", shared_cache=True)
    set_flags(platform, "gamma", shared_cache=True)
    assert call(platform, platform.key, json=_body(60))[0] == "miss"
    set_flags(platform, "beta", no_cache=True)
    assert call(platform, gamma, json=_body(60))[0] == "miss"  # beta's answer: not shared now
    assert call(platform, gamma, json=_body(60))[0] == "hit"  # gamma's own, now
    assert executions.count == 2


def test_a_hit_is_billed_by_the_cache_hit_rule_where_there_is_one(
    platform: Platform, executions: Executions
) -> None:
    platform.services.metering.balances.credit(
        BalanceScope.TENANT, "beta", 1_000_000, tenant="beta"
    )
    platform.price(2_500)
    platform.price(10, unit="row")
    platform.price(100, unit="cache_hit")
    call(platform, platform.key, json=_rows(70, 3), headers={"X-Request-Id": "bill-miss"})
    call(platform, platform.key, json=_rows(70, 3), headers={"X-Request-Id": "bill-hit"})
    miss, hit = events_of(platform, "bill-miss"), events_of(platform, "bill-hit")
    # the cache_hit rule never prices a call that ran
    assert set(miss) == {Unit.PREDICTION, Unit.ROW}
    assert miss[Unit.PREDICTION].amount_micros == 2_500
    assert (miss[Unit.ROW].quantity, miss[Unit.ROW].amount_micros) == (3, 30)
    assert set(hit) == {Unit.CACHE_HIT}  # the hit's rule alone: its rows are not charged
    assert (hit[Unit.CACHE_HIT].quantity, hit[Unit.CACHE_HIT].amount_micros) == (1, 100)
    balance = platform.services.metering.balances.get(BalanceScope.TENANT, "beta")
    assert balance.balance_micros == 1_000_000 - 2_630


def test_without_a_cache_hit_rule_a_hit_is_billed_as_any_call(
    platform: Platform, executions: Executions
) -> None:
    platform.price(2_500)
    platform.price(10, unit="row")
    call(platform, platform.key, json=_rows(80, 4), headers={"X-Request-Id": "plain-miss"})
    call(platform, platform.key, json=_rows(80, 4), headers={"X-Request-Id": "plain-hit"})
    hit = events_of(platform, "plain-hit")
    assert set(hit) == {Unit.PREDICTION, Unit.ROW}
    assert hit[Unit.PREDICTION].amount_micros == 2_500
    assert (hit[Unit.ROW].quantity, hit[Unit.ROW].amount_micros) == (4, 40)  # the rows answered
    assert hit[Unit.PREDICTION].compute_ms == 0.0  # nothing executed


def test_the_answer_records_its_provenance_as_cached(
    platform: Platform, executions: Executions
) -> None:
    services = platform.services
    principal = services.authenticator.authenticate(platform.key)
    spec = TensorSpec(name="x", datatype="FP32", shape=[-1, 4])

    async def decode(inputs: Any, outputs: Any) -> InferenceRequest:
        assert [t.name for t in inputs] == [spec.name]
        return InferenceRequest({"x": np.full((1, 4), 90.0, dtype=np.float32)})

    async def once() -> Any:
        target = ModelTarget("acme", "adder", "2")
        return await services.inference.call_model(Caller(principal), target, decode)

    first = platform.client.portal.call(once)  # type: ignore[union-attr]
    second = platform.client.portal.call(once)  # type: ignore[union-attr]
    assert (first.cache, first.provenance.cached) == ("miss", False)
    assert first.provenance.backend is not None
    assert (second.cache, second.provenance.cached) == ("hit", True)
    assert second.provenance.backend is None and second.provenance.version is not None
    assert second.provenance.age_seconds is not None and second.provenance.age_seconds >= 0
    assert second.usage.cpu_ms == 0.0
    np.testing.assert_array_equal(second.outputs["y"], first.outputs["y"])
    assert executions.count == 1


def test_a_manifest_that_says_deterministic_must_say_it_with_a_boolean(
    platform: Platform,
) -> None:
    with pytest.raises(AssertionError, match="deterministic"):
        platform.publisher.adder(version="3", runtime={"deterministic": "yes"})


def test_only_the_tenants_admins_or_the_platform_admin_set_its_cache_flags(
    platform: Platform,
) -> None:
    consumer = {"Authorization": f"Bearer {platform.key}"}
    refused = platform.client.patch("/api/tenants/beta", json={"no_cache": True}, headers=consumer)
    assert refused.status_code == 403
    boss = platform.services.tenancy.create_key("beta", "boss", name="b", actor="admin").secret
    owner = {"Authorization": f"Bearer {boss}"}
    done = platform.client.patch("/api/tenants/beta", json={"shared_cache": True}, headers=owner)
    assert done.status_code == 200, done.text
    assert (done.json()["no_cache"], done.json()["shared_cache"]) == (False, True)
    other = platform.client.patch("/api/tenants/gamma", json={"no_cache": True}, headers=owner)
    assert other.status_code == 404  # another tenant's: not even seen
    bad = platform.client.patch("/api/tenants/beta", json={"no_cache": "maybe"}, headers=owner)
    assert bad.status_code == 400
    audit = platform.client.get("/api/audit", params={"tenant": "beta"}).json()["items"]
    mine = [e for e in audit if e["actor"] == "beta/boss" and e["target"] == "/api/tenants/beta"]
    assert [(e["action"], e["status"]) for e in mine] == [  # newest first
        ("tenants.update_tenant", 400),
        ("tenants.update_tenant", 200),
    ]


def events_of(platform: Platform, request_id: str) -> dict[Unit, UsageEvent]:
    return {e.event.unit: e.event for e in platform.entries() if e.event.request_id == request_id}


def test_default_body_is_the_adder_body() -> None:
    assert _body(1)["inputs"][0]["data"] == ADDER_BODY["inputs"][0]["data"]


def test_two_gateways_share_answers_and_flag_changes_through_redis(
    tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two processes' services on one PostgreSQL and one Redis: an answer one computed
    is a hit in the other, and a tenant's no-cache declared through one reaches the other
    (its flags were cached for an hour) by the change event."""
    if database_url.startswith("sqlite"):
        pytest.skip("the distributed shape: PostgreSQL")
    url = os.environ.get("MODELPORT_TEST_REDIS_URL")
    if not url:
        skip_or_fail("Redis tests need MODELPORT_TEST_REDIS_URL")
    assert url is not None
    shared = {
        "redis_url": url,
        "resolve_cache_ttl_seconds": 3600,
        "blob_url": str(tmp_path / "blobs"),
    }
    first = make_platform(tmp_path / "one", database_url, **shared)
    client = redis.Redis.from_url(url)
    for name in client.scan_iter("modelport:*:respcache:*"):  # an earlier run's answers
        client.delete(name)
    second = None
    try:
        first.publisher.adder(version="2", runtime={"deterministic": True})
        approve(first.services, "acme", "adder", "2")
        second = make_platform(tmp_path / "two", database_url, seed=False, **shared)
        assert call(first, first.key, json=_body(100))[0] == "miss"
        executions = Executions(monkeypatch)
        assert call(second, second.key, json=_body(100))[0] == "hit"  # first's answer
        assert executions.count == 0
        set_flags(first, "beta", no_cache=True)
        assert eventually(lambda: call(second, second.key, json=_body(100))[0] is None)
    finally:
        for name in client.scan_iter("modelport:*:respcache:*"):
            client.delete(name)
        client.close()
        for platform in (first, second):
            if platform is not None:
                platform.close_client()
                platform.services.close()
