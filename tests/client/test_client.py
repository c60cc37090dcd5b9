"""``modelport.Client`` against a live server, family by family, with its errors."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

import modelport
from modelport.client import (
    AsyncClient,
    Client,
    ConfigurationError,
    Conflict,
    ConnectionFailed,
    Forbidden,
    InvalidRequest,
    NotFound,
    PaymentRequired,
    RateLimited,
    Unauthorized,
)
from modelport.client.transport import normalize_url
from tests.client.platform import MODEL, ROW, Platform
from tests.conftest import free_port


def test_models(platform: Platform) -> None:
    admin = platform.admin
    model = admin.models.get(MODEL)
    assert (model.model, model.task, model.license) == (MODEL, "regression", "MIT")
    admin.models.create("acme/other", task="embedding", tags=["x"])
    page = admin.models.list(task="embedding")
    assert [m.model for m in page.items] == ["acme/other"]
    first = admin.models.list(limit=1)
    assert len(first.items) == 1 and first.next_cursor
    rest = admin.models.list(limit=1, cursor=first.next_cursor)
    assert [m.model for m in rest.items] != [m.model for m in first.items]
    with pytest.raises(NotFound) as missing:
        admin.models.get("acme/none")
    assert (missing.value.status, missing.value.code) == (404, "model_not_found")
    with pytest.raises(Conflict) as again:
        admin.models.create(MODEL)
    assert again.value.status == 409 and again.value.code
    with pytest.raises(ValueError, match="owner/name"):
        admin.models.get("no-slash")


def test_bad_key_is_unauthorized_and_a_consumer_is_forbidden(platform: Platform) -> None:
    with platform.client("mp_not_a_key_" + "x" * 30) as stranger, pytest.raises(Unauthorized) as no:
        stranger.models.list()
    assert no.value.status == 401 and no.value.code
    ref = platform.publish("1")
    with platform.client(platform.consumer_key) as consumer, pytest.raises(Forbidden) as denied:
        consumer.versions.transition(ref, "validated")
    assert denied.value.status == 403


def test_versions_validation_and_lifecycle(platform: Platform) -> None:
    admin = platform.admin
    ref = platform.publish("1")
    version = admin.versions.get(ref)
    assert (version.state, version.format, version.ref) == ("candidate", "onnx", "acme/adder:1")
    assert version.manifest is not None and version.signatures is not None
    with pytest.raises(NotFound) as none:
        admin.versions.validation(ref)
    assert none.value.code == "validation_not_found"
    moved = admin.versions.transition(ref, "validated", "tests")
    assert (moved.from_state, moved.state) == ("candidate", "validated")
    report = admin.versions.validation(ref)
    assert report.passed and report.problems == []
    assert [v.version for v in admin.versions.list(MODEL)] == ["1"]
    assert [e["to"] for e in admin.versions.events(ref)] == ["candidate", "validated"]


def test_a_failed_validation_says_why(platform: Platform) -> None:
    admin = platform.admin
    ref = platform.publish("2", expected=[[9.0, 9.0, 9.0, 9.0]])
    with pytest.raises(InvalidRequest) as failed:
        admin.versions.transition(ref, "validated")
    assert failed.value.code == "validation_failed"
    report = admin.versions.validation(ref)
    assert not report.passed
    assert report.problems and all(p.startswith("example 0: ") for p in report.problems)
    assert "y" in " ".join(report.problems)


def test_aliases(platform: Platform) -> None:
    admin = platform.admin
    platform.publish("1")
    alias = admin.aliases.set(MODEL, "prod", "1")
    assert (alias.alias, alias.version) == ("prod", "1")
    assert [(a.alias, a.version) for a in admin.aliases.list(MODEL)] == [("prod", "1")]
    admin.aliases.delete(MODEL, "prod")
    assert admin.aliases.list(MODEL) == []
    with pytest.raises(NotFound):
        admin.aliases.delete(MODEL, "prod")


def test_predict_load_and_unload(platform: Platform) -> None:
    admin = platform.admin
    ref = platform.approved("1")
    loaded = admin.versions.load(ref)
    assert (loaded.model, loaded.version, loaded.state) == (MODEL, "1", "READY")
    result = admin.infer(ref, {"x": np.asarray(ROW, dtype=np.float32)})
    assert result.model_version == "1"
    np.testing.assert_array_equal(result.outputs["y"], np.asarray(ROW, np.float32) + 1)
    assert result.outputs["y"].dtype == np.float32
    # Lists take the datatype the model declares (FP32), not float64.
    listed = admin.predict.infer(MODEL, {"x": ROW})
    assert listed.outputs["y"].tolist() == [[2.0, 3.0, 4.0, 5.0]]
    with pytest.raises(InvalidRequest) as wrong:
        admin.infer(ref, {"x": np.ones((1, 3), np.float32)})
    assert wrong.value.status == 400 and wrong.value.code
    assert admin.versions.unload(ref).versions == [ref]
    with pytest.raises(NotFound) as unloaded:
        admin.versions.unload(ref)
    assert unloaded.value.code == "model_not_loaded"
    with pytest.raises(NotFound):
        admin.infer("acme/none", {"x": np.ones((1, 4), np.float32)})


def test_endpoints_deploy_call_and_roll_back(platform: Platform) -> None:
    admin = platform.admin
    one, two = platform.approved("1"), platform.approved("2")
    endpoint = admin.endpoints.create("adder", tenant="acme")
    assert (endpoint.name, endpoint.tenant, endpoint.active_deployment) == ("adder", "acme", None)
    with pytest.raises(Conflict):
        admin.endpoints.create("adder", tenant="acme")
    first = admin.endpoints.wait("adder", admin.endpoints.deploy("adder", [one]).id)
    assert (first.state, first.ready) == ("active", True)
    result = admin.infer("adder", {"x": ROW})
    assert result.model_version == "acme/adder:1"  # an endpoint answers with the whole ref
    assert result.outputs["y"].tolist() == [[2.0, 3.0, 4.0, 5.0]]
    split = admin.endpoints.deploy("adder", [one, two], weights=[90, 10])
    second = admin.endpoints.wait("adder", split.id)
    assert [v["weight"] for v in second.versions] == [90, 10]
    shown = admin.endpoints.get("adder")
    assert shown.active_deployment == second.id
    assert [(t["version"], t["weight"]) for t in shown.traffic] == [("1", 90), ("2", 10)]
    assert [d.id for d in admin.endpoints.deployments("adder")] == [second.id, first.id]
    back = admin.endpoints.rollback("adder", second.id)
    assert back.rolled_back.id == second.id
    assert back.endpoint.active_deployment == first.id
    assert [e.name for e in admin.endpoints.list("acme")] == ["adder"]
    with pytest.raises(InvalidRequest) as bad:
        admin.endpoints.deploy("adder", [one, two], weights=[50, 10])
    assert bad.value.code == "invalid_deployment"
    with pytest.raises(ValueError, match="weights"):
        admin.endpoints.deploy("adder", [one, two])
    with pytest.raises(NotFound):
        admin.endpoints.get("nothing")


def test_keys(platform: Platform) -> None:
    admin = platform.admin
    made = admin.keys.create("ci", tenant="acme", member="carl", scopes=["model.read"])
    assert made.key and made.scopes == ["model.read"] and made.principal
    with platform.client(made.key) as ci:
        assert ci.models.get(MODEL).model == MODEL
    assert made.id in [k.id for k in admin.keys.list(tenant="acme")]
    rotated = admin.keys.rotate(made.id)
    assert rotated.key and rotated.key != made.key
    with platform.client(made.key) as old, pytest.raises(Unauthorized):
        old.models.get(MODEL)
    revoked = admin.keys.revoke(rotated.id)
    assert revoked.revoked_at is not None
    with platform.client(rotated.key) as gone, pytest.raises(Unauthorized):
        gone.models.get(MODEL)


def test_prices_usage_and_invoices(platform: Platform) -> None:
    admin = platform.admin
    platform.publish("1")
    price = admin.prices.set(MODEL, "prediction", 2500)
    assert (price.model, price.version, price.unit_price_micros, price.per_units) == (
        MODEL,
        None,
        2500,
        1,
    )
    assert [p.id for p in admin.prices.list(MODEL)] == [price.id]
    with pytest.raises(NotFound):
        admin.prices.set(MODEL, "prediction", 1, version="9")
    with pytest.raises(InvalidRequest):
        admin.prices.set(MODEL, "parsec", 1)
    page = admin.usage.list(tenant="acme")
    assert page.items == [] and page.next_cursor is None
    assert admin.invoices.list(tenant="acme") == []
    with pytest.raises(NotFound):
        admin.invoices.get(424242)


def test_limits_and_rate_limited(platform: Platform) -> None:
    admin = platform.admin
    ref = platform.approved("1")
    limits = admin.limits.set("tenant", "acme", rpm=1)
    assert (limits.scope_type, limits.scope_id, limits.rpm, limits.concurrency) == (
        "tenant",
        "acme",
        1,
        None,
    )
    assert admin.limits.get("tenant", "acme").rpm == 1
    assert [(x.scope_type, x.scope_id) for x in admin.limits.list(tenant="acme")] == [
        ("tenant", "acme")
    ]
    with platform.client(platform.consumer_key) as consumer:
        consumer.infer(ref, {"x": ROW})
        with pytest.raises(RateLimited) as limited:
            consumer.infer(ref, {"x": np.asarray(ROW, np.float32)})
    assert limited.value.status == 429 and limited.value.code
    assert limited.value.retry_after is not None and limited.value.retry_after > 0
    admin.limits.delete("tenant", "acme")
    with pytest.raises(NotFound):
        admin.limits.get("tenant", "nobody")


def test_budget_refusal_is_payment_required(platform: Platform) -> None:
    ref = platform.approved("1")
    platform.admin.prices.set(MODEL, "prediction", 2500)
    response = platform.admin.http.put("/api/budgets/acme", json={"hard_cap_micros": 0})
    assert response.status_code == 200, response.text
    with platform.client(platform.consumer_key) as consumer, pytest.raises(PaymentRequired) as no:
        consumer.infer(ref, {"x": np.asarray(ROW, np.float32)})
    assert no.value.status == 402 and no.value.code


def test_grants(platform: Platform) -> None:
    with platform.client(platform.owner_key) as owner:
        grant = owner.grants.add("globex", model="adder")
        assert (grant.namespace, grant.model, grant.grantee) == ("acme", "adder", "globex")
        assert [g.id for g in owner.grants.list()] == [grant.id]
        owner.grants.remove(grant.id)
        assert owner.grants.list() == []
        with pytest.raises(NotFound):
            owner.grants.remove(grant.id)
        with pytest.raises(NotFound):
            owner.grants.add("nobody")


def test_async_client(platform: Platform) -> None:
    ref = platform.approved("1")

    async def scenario() -> None:
        async with AsyncClient(platform.server.url, platform.consumer_key) as client:
            model = await client.models.get(MODEL)
            assert model.model == MODEL
            versions = await client.versions.list(MODEL)
            assert [v.version for v in versions] == ["1"]
            result = await client.infer(ref, {"x": np.asarray(ROW, np.float32)})
            assert result.outputs["y"].tolist() == [[2.0, 3.0, 4.0, 5.0]]
            with pytest.raises(NotFound):
                await client.models.get("acme/none")
        async with AsyncClient(f"127.0.0.1:{free_port()}") as down:
            with pytest.raises(ConnectionFailed):
                await down.models.list()

    asyncio.run(scenario())


def test_nothing_listening_is_connection_failed() -> None:
    port = free_port()
    with Client(f"http://127.0.0.1:{port}") as client, pytest.raises(ConnectionFailed) as down:
        client.models.list()
    message = str(down.value)
    assert f"127.0.0.1:{port}" in message and "server runs" in message
    assert "\n" not in message


def test_urls_are_checked() -> None:
    assert normalize_url("localhost:8080/") == "http://localhost:8080"
    assert normalize_url(" https://mp.example ") == "https://mp.example"
    for bad in ("ftp://host", "", "http://"):
        with pytest.raises(ConfigurationError):
            Client(bad)


def test_the_package_exports_the_client_lazily() -> None:
    assert modelport.Client is Client
    assert modelport.AsyncClient is AsyncClient
    with pytest.raises(AttributeError):
        _ = modelport.Nothing  # type: ignore[attr-defined]
