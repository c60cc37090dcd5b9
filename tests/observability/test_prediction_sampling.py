"""Direct version calls in the prediction log: kept where a tenant's or a version's
sampling rate says so (none by default), decided by call id, with their inputs and
outputs only where payload logging is on; and who may set which, on both databases."""

from __future__ import annotations

import numpy as np
import pytest
from sqlalchemy import select
from starlette.testclient import TestClient

from modelport.app import Services
from modelport.observability.sampling import PredictionSampling, SamplingPolicy, keeps
from modelport.registry import repository as registry_repo
from modelport.registry.types import LifecycleState
from modelport.store.tables import PredictionRow
from tests.api_v2.conftest import Publisher, infer_body
from tests.conftest import ensure_tenant
from tests.polling import eventually

X = np.array([[1, 2, 3, 4]], np.float32)
CALL = "/v2/models/acme/adder/versions/1/infer"
VERSION_LOG = "/api/models/acme/adder/versions/1/prediction-log"


def direct_records(services: Services) -> list[PredictionRow]:
    with services.database.transaction() as session:
        rows = list(
            session.scalars(
                select(PredictionRow)
                .where(PredictionRow.endpoint == "")
                .order_by(PredictionRow.received_at)
            )
        )
        session.expunge_all()
        return rows


def logged(services: Services, count: int) -> list[PredictionRow]:
    """The direct calls' records once ``count`` are written."""
    assert eventually(lambda: len(direct_records(services)) >= count)
    return direct_records(services)


def key(services: Services, tenant: str, member: str, roles: list[str]) -> dict[str, str]:
    services.tenancy.add_member(tenant, member, roles=roles, actor="admin")
    secret = services.tenancy.create_key(tenant, member, name="k", actor="admin").secret
    return {"Authorization": f"Bearer {secret}"}


@pytest.fixture
def adder(client: TestClient, services: Services) -> TestClient:
    """``acme/adder`` 1, public (every tenant may call it), and ``acme/secret`` 1, private."""
    publisher = Publisher(client, services)
    ensure_tenant(client, "acme")
    created = client.post(
        "/api/models",
        json={"owner": "acme", "name": "adder", "license": "MIT", "visibility": "public"},
    )
    assert created.status_code == 201, created.text
    publisher.models.add("acme/adder")
    publisher.adder()
    publisher.adder("acme/secret")
    with services.database.transaction() as session:  # seeded: other tenants may call it
        vid = registry_repo.version_id(session, "acme", "adder", "1", lock=True)
        current = registry_repo.current_state(session, vid)
        registry_repo.append_event(
            session, vid, current, LifecycleState.APPROVED, actor="seed", reason="seed"
        )
    return client


def test_keeps_is_decided_by_the_call_id() -> None:
    ids = [f"call-{n}" for n in range(2000)]
    half = {i for i in ids if keeps(i, 0.5)}
    assert 900 < len(half) < 1100
    assert half == {i for i in ids if keeps(i, 0.5)}  # a retry is decided the same
    assert {i for i in ids if keeps(i, 0.25)} <= half  # a lower rate keeps a subset
    assert not any(keeps(i, 0.0) for i in ids) and all(keeps(i, 1.0) for i in ids)


def test_the_higher_rate_applies_and_the_callers_payload_switch_decides(
    services: Services,
) -> None:
    sampling = PredictionSampling(services.database)
    assert not sampling.active and sampling.decide("c", "beta", "acme/adder", "1") is None
    sampling.set_version("acme/adder", "1", SamplingPolicy(1.0, payloads=True), actor="t")
    assert sampling.active
    assert sampling.decide("c", "acme", "acme/adder", "1") is True  # the owner's own calls
    # Another tenant's calls are sampled by the version's rate, their payloads kept only
    # where that tenant opts in.
    assert sampling.decide("c", "beta", "acme/adder", "1") is False
    assert sampling.decide("c", "beta", "acme/adder", "2") is None  # another version
    sampling.set_tenant("beta", SamplingPolicy(0.0, payloads=True), actor="t")
    assert sampling.decide("c", "beta", "acme/adder", "1") is True
    # The caller's tenant opts out of payloads: its calls stay sampled by the version's rate.
    sampling.set_tenant("beta", SamplingPolicy(0.0, payloads=False), actor="t")
    assert sampling.decide("c", "beta", "acme/adder", "1") is False
    assert sampling.decide("c", "gamma", "acme/adder", "1") is False
    # A tenant's own rate covers its calls of any version.
    sampling.set_tenant("gamma", SamplingPolicy(1.0, payloads=False), actor="t")
    assert sampling.decide("c", "gamma", "globex/other", "3") is False
    # Another process's change arrives with a refresh; removing every policy turns it off.
    other = PredictionSampling(services.database)
    other.refresh()
    assert other.decide("c", "gamma", "globex/other", "3") is False
    for tenant in ("beta", "gamma"):
        sampling.set_tenant(tenant, None, actor="t")
    sampling.set_version("acme/adder", "1", None, actor="t")
    assert not sampling.active
    assert sampling.tenant_policy("beta") == (SamplingPolicy(), False)


def test_a_direct_call_is_logged_only_at_its_rate_with_payloads_by_their_switch(
    adder: TestClient, services: Services
) -> None:
    client = adder
    assert client.post(CALL, json=infer_body("x", X)).status_code == 200  # rate 0
    assert client.get("/api/tenants/admin/prediction-log").status_code in (200, 404)
    put = client.put(VERSION_LOG, json={"rate": 1.0})
    assert put.status_code == 200, put.text
    assert put.json() == {
        "model": "acme/adder",
        "version": "1",
        "rate": 1.0,
        "payloads": False,
        "default": False,
    }
    assert client.post(CALL, json=infer_body("x", X)).status_code == 200
    (metadata,) = logged(services, 1)  # the call at rate 0 left none
    assert (metadata.model, metadata.version, metadata.owner, metadata.status) == (
        "acme/adder",
        "1",
        "acme",
        "ok",
    )
    assert metadata.latency_seconds > 0 and "execute" in metadata.stages
    # The answer (for outcome joins) is metadata: the argmax of y = x + 1.
    assert metadata.backend == "local:acme/adder:1" and metadata.answer_label == "3"
    assert (metadata.detail, metadata.inputs, metadata.outputs) == ("none", None, None)
    read = client.get(f"/api/predictions/{metadata.id}")
    assert read.status_code == 200 and read.json()["model"] == "acme/adder"

    client.put(VERSION_LOG, json={"rate": 1.0, "payloads": True})
    assert client.post(CALL, json=infer_body("x", X)).status_code == 200
    (payload,) = [r for r in logged(services, 2) if r.id != metadata.id]
    assert payload.detail == "logged"
    assert payload.inputs is not None and payload.inputs[0]["data"] == [1.0, 2.0, 3.0, 4.0]
    assert payload.outputs is not None and payload.outputs[0]["data"] == [2.0, 3.0, 4.0, 5.0]


def test_half_the_calls_are_kept_by_their_ids(adder: TestClient, services: Services) -> None:
    assert adder.put(VERSION_LOG, json={"rate": 0.5}).status_code == 200
    for _ in range(40):
        assert adder.post(CALL, json=infer_body("x", X)).status_code == 200
    # The log writes in order: once a later call's record is in, the 40 are decided.
    gate = "/api/models/acme/secret/versions/1/prediction-log"
    assert adder.put(gate, json={"rate": 1.0}).status_code == 200
    secret = "/v2/models/acme/secret/versions/1/infer"
    assert adder.post(secret, json=infer_body("x", X)).status_code == 200
    assert eventually(lambda: any(r.model == "acme/secret" for r in direct_records(services)))
    kept = [r for r in direct_records(services) if r.model == "acme/adder"]
    # Only ids in the half are kept; of 40 calls, some are and some are not (each
    # extreme has a chance of 2^-40).
    assert all(keeps(r.id, 0.5) for r in kept)
    assert 0 < len(kept) < 40


def test_who_may_set_which_rate(adder: TestClient, services: Services) -> None:
    client = adder
    client.post("/api/tenants", json={"slug": "beta"})
    acme_owner = key(services, "acme", "ann", ["owner"])
    acme_consumer = key(services, "acme", "cid", ["consumer"])
    beta_owner = key(services, "beta", "bob", ["owner"])
    body = {"rate": 0.1, "payloads": True}
    tenant_log = "/api/tenants/acme/prediction-log"
    # A tenant's own policy: its managers set it, its members read it, others see nothing.
    assert client.put(tenant_log, json=body, headers=acme_owner).status_code == 200
    assert client.get(tenant_log, headers=acme_consumer).json()["rate"] == 0.1
    assert client.put(tenant_log, json=body, headers=acme_consumer).status_code == 403
    assert client.get(tenant_log, headers=beta_owner).status_code == 404
    assert client.put(tenant_log, json=body, headers=beta_owner).status_code == 404
    assert client.put("/api/tenants/nobody/prediction-log", json=body).status_code == 404
    # A version's: its model's publishers set it; a tenant that sees it may not.
    assert client.put(VERSION_LOG, json=body, headers=acme_owner).status_code == 200
    refused = client.put(VERSION_LOG, json=body, headers=beta_owner)
    assert refused.status_code == 403, refused.text
    assert client.get(VERSION_LOG, headers=beta_owner).json()["rate"] == 0.1
    hidden = "/api/models/acme/secret/versions/1/prediction-log"
    assert client.put(hidden, json=body, headers=beta_owner).status_code == 404
    assert client.put(hidden, json=body, headers=acme_owner).status_code == 200
    missing = "/api/models/acme/adder/versions/9/prediction-log"
    assert client.put(missing, json=body, headers=acme_owner).status_code == 404
    assert (
        client.put("/api/models/acme/nope/versions/1/prediction-log", json=body).status_code == 404
    )
    for bad in (1.5, -0.1):
        wrong = client.put(VERSION_LOG, json={"rate": bad})
        assert wrong.status_code == 400 and wrong.json()["code"] == "invalid_sampling"
    reset = client.put(VERSION_LOG, json={"rate": None})
    assert reset.json() == {
        "model": "acme/adder",
        "version": "1",
        "rate": 0.0,
        "payloads": False,
        "default": True,
    }


def test_a_consumers_payload_opt_out_wins_over_the_versions(
    adder: TestClient, services: Services
) -> None:
    client = adder
    client.post("/api/tenants", json={"slug": "beta"})
    beta = key(services, "beta", "bob", ["owner", "consumer"])
    client.put(VERSION_LOG, json={"rate": 1.0, "payloads": True})
    # With no policy of its own, beta's inputs do not reach the publisher's log.
    called = client.post(CALL, json=infer_body("x", X), headers=beta)
    assert called.status_code == 200, called.text
    (first,) = logged(services, 1)
    assert (first.tenant, first.owner, first.detail) == ("beta", "acme", "none")
    opted = client.put(
        "/api/tenants/beta/prediction-log", json={"rate": 0, "payloads": False}, headers=beta
    )
    assert opted.status_code == 200, opted.text
    called = client.post(CALL, json=infer_body("x", X), headers=beta)
    assert called.status_code == 200, called.text
    (record,) = [r for r in logged(services, 2) if r.id != first.id]
    assert (record.tenant, record.owner, record.detail) == ("beta", "acme", "none")
