"""Endpoints and deployments over HTTP, on SQLite and PostgreSQL: creation, progress,
validation refusals, tenancy, failed loads, rollback and its window."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.orm import Session as OrmSession

from modelport.errors import Unprocessable
from modelport.serving.endpoints.spec import spec_from_json
from tests.registry.helpers import find_blob_file
from tests.serving.conftest import ROW, Serving, ServingFactory, add_constant, example


def eventually(condition: Callable[[], bool], seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.01)


def key_for(serving: Serving, tenant: str, role: str) -> dict[str, str]:
    serving.ensure_tenant(tenant)
    tenancy = serving.services.tenancy
    tenancy.add_member(tenant, role, roles=[role], actor="admin")
    issued = tenancy.create_key(tenant, role, name="test", actor="admin")
    return {"Authorization": f"Bearer {issued.secret}"}


def hosted(serving: Serving, ref: str) -> bool:
    model, _, version = ref.rpartition(":")
    return serving.services.host.find(model, version) is not None


class TestEndpoints:
    def test_create_show_list(self, serving_db: Serving) -> None:
        created = serving_db.endpoint("fraud", deadline_ms=2000, priority="batch")
        assert created["tenant"] == "acme"
        assert created["priority"] == "batch"
        assert created["active_deployment"] is None
        assert created["schema"] is None
        shown = serving_db.client.get("/api/endpoints/fraud").json()
        assert shown["deadline_ms"] == 2000
        listed = serving_db.client.get("/api/endpoints").json()["items"]
        assert [e["name"] for e in listed] == ["fraud"]
        offline = serving_db.endpoint("scoring", priority="offline")
        assert offline["priority"] == "offline"
        assert serving_db.client.get("/api/endpoints/scoring").json()["priority"] == "offline"

    def test_names_are_unique_and_checked(self, serving: Serving) -> None:
        serving.endpoint("fraud")
        again = serving.client.post("/api/endpoints", json={"name": "fraud", "tenant": "acme"})
        assert again.status_code == 409
        assert again.json()["code"] == "endpoint_exists"
        bad = serving.client.post("/api/endpoints", json={"name": "Fraud!", "tenant": "acme"})
        assert bad.status_code == 400
        assert bad.json()["code"] == "invalid_endpoint_name"
        # /v2/models/stats is Triton's statistics of every model, never an endpoint's.
        taken = serving.client.post("/api/endpoints", json={"name": "stats", "tenant": "acme"})
        assert taken.status_code == 400
        assert taken.json()["code"] == "invalid_endpoint_name"
        assert "reserved" in taken.json()["detail"]
        unknown = serving.client.get("/api/endpoints/nope")
        assert unknown.status_code == 404
        assert unknown.json()["code"] == "endpoint_not_found"

    def test_predict_before_any_deployment_is_unavailable(self, serving: Serving) -> None:
        serving.endpoint("fraud")
        response = serving.predict("fraud")
        assert response.status_code == 503
        assert response.json()["code"] == "no_active_deployment"


class TestDeploying:
    def test_progress_per_version_then_traffic(self, serving_db: Serving) -> None:
        v1 = serving_db.publish("acme/fraud", "1", examples=[example(1.0)])
        serving_db.endpoint("fraud")
        deployment = serving_db.deploy("fraud", [(v1, 100)])
        assert deployment["state"] == "active"
        assert deployment["ready"] is True
        (version,) = deployment["versions"]
        assert version["state"] == "ready"
        assert set(version["phases"]) == {"fetch", "verify", "load", "warmup"}
        assert version["warm_up"].startswith("example 0 ran")
        assert version["memory_bytes"] > 0
        endpoint = serving_db.client.get("/api/endpoints/fraud").json()
        assert endpoint["active_deployment"] == deployment["id"]
        assert endpoint["schema"]["inputs"] == [{"name": "x", "datatype": "FP32", "shape": [-1, 4]}]
        assert endpoint["traffic"] == [{"model": "acme/fraud", "version": "1", "weight": 100}]
        answer = serving_db.predict("fraud").json()
        assert answer["model_version"] == "1"
        assert answer["outputs"] == {"y": [[2.0, 3.0, 4.0, 5.0]]}

    def test_a_version_that_fails_warm_up_fails_the_deployment_and_moves_nothing(
        self, serving: Serving
    ) -> None:
        v1 = serving.publish("acme/fraud", "1")
        bad = serving.publish("acme/fraud", "2", examples=[example(7.0)])  # expects x + 7
        serving.endpoint("fraud")
        first = serving.deploy("fraud", [(v1, 100)])
        failed = serving.deploy("fraud", [(v1, 50), (bad, 50)])
        assert failed["state"] == "failed"
        assert "acme/fraud:2" in failed["cause"]
        assert "warm-up" in failed["cause"]
        states = {v["version"]: v["state"] for v in failed["versions"]}
        assert states == {"1": "ready", "2": "failed"}
        endpoint = serving.client.get("/api/endpoints/fraud").json()
        assert endpoint["active_deployment"] == first["id"]
        assert all(serving.predict("fraud").json()["model_version"] == "1" for _ in range(10))

    def test_a_second_deployment_waits_for_the_pending_one(self, serving: Serving) -> None:
        v1 = serving.publish("acme/fraud", "1")
        serving.endpoint("fraud")
        serving.services.serving.controller.submit = lambda deployment: None  # stays pending
        serving.deploy("fraud", [(v1, 100)], wait=False)
        again = serving.client.post(
            "/api/endpoints/fraud/deployments",
            json={"versions": [{"model": "acme/fraud", "version": "1", "weight": 100}]},
        )
        assert again.status_code == 409
        assert again.json()["code"] == "deployment_in_progress"


class TestValidation:
    """Every refusal happens before anything changes: no deployment is recorded."""

    def refused(self, serving: Serving, body: dict[str, object], status: int, code: str) -> None:
        response = serving.client.post("/api/endpoints/fraud/deployments", json=body)
        assert response.status_code == status, response.text
        assert response.json()["code"] == code
        listed = serving.client.get("/api/endpoints/fraud/deployments").json()["items"]
        assert listed == []

    @staticmethod
    def body(*versions: tuple[str, str, int], **extra: object) -> dict[str, object]:
        return {
            "versions": [{"model": m, "version": v, "weight": w} for m, v, w in versions],
            **extra,
        }

    def test_unapproved_version(self, serving_db: Serving) -> None:
        serving_db.publish("acme/fraud", "1")
        serving_db.publish("acme/fraud", "2", state="validated")
        serving_db.endpoint("fraud")
        body = self.body(("acme/fraud", "1", 90), ("acme/fraud", "2", 10))
        self.refused(serving_db, body, 409, "version_not_approved")
        shadow = self.body(("acme/fraud", "1", 100), shadow={"model": "acme/fraud", "version": "2"})
        self.refused(serving_db, shadow, 409, "version_not_approved")

    def test_incompatible_schema(self, serving_db: Serving) -> None:
        serving_db.publish("acme/fraud", "1")
        wide = [{"name": "x", "datatype": "FP32", "shape": [-1, 8]}]
        serving_db.publish("acme/fraud", "2", inputs=wide)
        serving_db.endpoint("fraud")
        body = self.body(("acme/fraud", "1", 90), ("acme/fraud", "2", 10))
        response = serving_db.client.post("/api/endpoints/fraud/deployments", json=body)
        assert response.status_code == 422
        assert response.json()["code"] == "incompatible_schema"
        assert response.json()["problems"] == ["input 'x' has shape [-1, 8], not [-1, 4]"]

    def test_memory_budget(self, make_serving: ServingFactory) -> None:
        serving = make_serving(runtime_memory_budget_bytes=1 << 20)
        serving.publish("acme/fraud", "1")
        serving.endpoint("fraud")
        body = self.body(("acme/fraud", "1", 100), resources={"memory_bytes": 2 << 20})
        self.refused(serving, body, 422, "insufficient_memory")

    def test_tenant_quota_counts_live_deployments(self, make_serving: ServingFactory) -> None:
        serving = make_serving(serving_tenant_memory_bytes=5 << 20)
        serving.publish("acme/fraud", "1")
        serving.publish("acme/fraud", "2")
        serving.endpoint("fraud")
        serving.endpoint("other")
        one = self.body(("acme/fraud", "1", 100), resources={"memory_bytes": 2 << 20})
        assert serving.client.post("/api/endpoints/other/deployments", json=one).status_code == 202
        replicas = self.body(
            ("acme/fraud", "2", 100), resources={"memory_bytes": 1 << 20, "max_replicas": 4}
        )
        self.refused(serving, replicas, 422, "quota_exceeded")
        fits = self.body(("acme/fraud", "2", 100), resources={"memory_bytes": 1 << 20})
        assert serving.client.post("/api/endpoints/fraud/deployments", json=fits).status_code == 202

    def test_two_creations_at_once_cannot_both_pass_the_quota(
        self, make_serving: ServingFactory, database_url: str
    ) -> None:
        # Two gateways create deployments of one tenant on two endpoints at once: each
        # fits the quota alone, not both.
        first = make_serving(database_url, serving_tenant_memory_bytes=3 << 20)
        first.publish("acme/fraud", "1")
        first.endpoint("fraud")
        first.endpoint("other")
        second = make_serving(
            database_url,
            home=first.services.settings.store.home,
            serving_tenant_memory_bytes=3 << 20,
        )
        spec = spec_from_json(
            self.body(("acme/fraud", "1", 100), resources={"memory_bytes": 2 << 20})
        )
        checking: list[int] = []
        read: list[bool] = []
        checked, resume = threading.Event(), threading.Event()

        def reading(conn: Any, clause: Any, *rest: Any) -> None:
            if threading.get_ident() in checking and "FROM deployments" in str(clause):
                read.append(True)

        def pause(session: Any) -> None:
            # The first creation has read the live deployments for its check, and its
            # read is over (no lock held): the other gateway comes in between.
            if threading.get_ident() in checking and read:
                checking.clear()
                checked.set()
                resume.wait(60)

        outcomes: dict[str, Any] = {}

        def create(serving: Serving, endpoint: str, paused: bool) -> None:
            if paused:
                checking.append(threading.get_ident())
            try:
                outcomes[endpoint] = serving.services.serving.endpoints.create_deployment(
                    endpoint, spec, actor="t"
                )
            except Exception as exc:
                outcomes[endpoint] = exc

        engine = first.services.database.engine
        event.listen(engine, "after_execute", reading)
        event.listen(OrmSession, "after_commit", pause)
        try:
            slow = threading.Thread(target=create, args=(first, "fraud", True))
            slow.start()
            assert checked.wait(60)
            create(second, "other", False)  # the other gateway, in between
            resume.set()
            slow.join(10)
        finally:
            resume.set()
            event.remove(engine, "after_execute", reading)
            event.remove(OrmSession, "after_commit", pause)
        assert outcomes["other"].state.value == "pending"
        refused = outcomes["fraud"]
        assert isinstance(refused, Unprocessable) and refused.code == "quota_exceeded", refused

    def test_missing_blob(self, serving: Serving) -> None:
        serving.publish("acme/fraud", "1", model=add_constant(3.0))
        serving.endpoint("fraud")
        digest = (
            serving.services.registry.get_version("acme", "fraud", "1").manifest.files[0].digest
        )
        find_blob_file(serving.services.settings.store.home, digest).unlink()
        self.refused(serving, self.body(("acme/fraud", "1", 100)), 422, "blob_missing")

    def test_malformed_specs(self, serving: Serving) -> None:
        serving.publish("acme/fraud", "1")
        serving.endpoint("fraud")
        self.refused(serving, self.body(("acme/fraud", "1", 60)), 400, "invalid_deployment")
        self.refused(serving, self.body(("acme/fraud", "9", 100)), 404, "version_not_found")
        self.refused(serving, {"versions": []}, 400, "invalid_request")


class TestTenancy:
    def test_another_tenants_endpoint_is_not_found(self, serving_db: Serving) -> None:
        v1 = serving_db.publish("acme/fraud", "1")
        serving_db.endpoint("fraud")
        deployment = serving_db.deploy("fraud", [(v1, 100)])
        outsider = key_for(serving_db, "globex", "owner")
        client = serving_db.client
        for method, path in [
            ("GET", "/api/endpoints/fraud"),
            ("GET", "/api/endpoints/fraud/deployments"),
            ("GET", f"/api/endpoints/fraud/deployments/{deployment['id']}"),
            ("POST", "/api/endpoints/fraud:predict"),
            ("POST", f"/api/endpoints/fraud/deployments/{deployment['id']}:rollback"),
        ]:
            response = client.request(method, path, headers=outsider, json={"inputs": {"x": ROW}})
            assert response.status_code == 404, (method, path, response.text)
            assert response.json()["code"] == "endpoint_not_found"
        assert client.get("/api/endpoints", headers=outsider).json()["items"] == []

    def test_roles_in_the_owning_tenant(self, serving: Serving) -> None:
        v1 = serving.publish("acme/fraud", "1")
        serving.endpoint("fraud")
        serving.deploy("fraud", [(v1, 100)])
        consumer = key_for(serving, "acme", "consumer")
        deployer = key_for(serving, "acme", "deployer")
        client = serving.client
        assert serving.predict("fraud", headers=consumer).status_code == 200
        assert serving.predict("fraud", headers=deployer).status_code == 403
        body = {"versions": [{"model": "acme/fraud", "version": "1", "weight": 100}]}
        denied = client.post("/api/endpoints/fraud/deployments", json=body, headers=consumer)
        assert denied.status_code == 403
        made = client.post("/api/endpoints", json={"name": "mine"}, headers=deployer)
        assert made.status_code == 201
        assert made.json()["tenant"] == "acme"

    def test_another_tenants_private_model_cannot_be_deployed(self, serving: Serving) -> None:
        serving.publish("globex/secret", "1")
        serving.publish("globex/open", "1", visibility="public")
        serving.endpoint("fraud")
        body = {"versions": [{"model": "globex/secret", "version": "1", "weight": 100}]}
        hidden = serving.client.post("/api/endpoints/fraud/deployments", json=body)
        assert hidden.status_code == 404
        body = {"versions": [{"model": "globex/open", "version": "1", "weight": 100}]}
        assert serving.client.post("/api/endpoints/fraud/deployments", json=body).status_code == 202


class TestRollback:
    def test_rollback_restores_the_previous_deployment_at_once(self, serving_db: Serving) -> None:
        v1 = serving_db.publish("acme/fraud", "1")
        v2 = serving_db.publish("acme/fraud", "2", model=add_constant(2.0))
        serving_db.endpoint("fraud")
        first = serving_db.deploy("fraud", [(v1, 100)])
        second = serving_db.deploy("fraud", [(v2, 100)])
        assert serving_db.predict("fraud").json()["model_version"] == "2"
        assert serving_db.deployment("fraud", first["id"])["state"] == "superseded"
        assert hosted(serving_db, v1)  # the previous deployment stays warm
        response = serving_db.client.post(
            f"/api/endpoints/fraud/deployments/{second['id']}:rollback"
        )
        assert response.status_code == 200, response.text
        assert response.json()["rolled_back"]["state"] == "rolled_back"
        assert response.json()["endpoint"]["active_deployment"] == first["id"]
        assert all(serving_db.predict("fraud").json()["model_version"] == "1" for _ in range(5))
        again = serving_db.client.post(f"/api/endpoints/fraud/deployments/{second['id']}:rollback")
        assert again.status_code == 409
        assert again.json()["code"] == "deployment_not_active"

    def test_the_window_closes_and_the_old_versions_go(self, serving: Serving) -> None:
        v1 = serving.publish("acme/fraud", "1")
        v2 = serving.publish("acme/fraud", "2", model=add_constant(2.0))
        serving.endpoint("fraud")
        first = serving.deploy("fraud", [(v1, 100)])
        second = serving.deploy("fraud", [(v2, 100)])
        window = serving.services.settings.serving.rollback_window_seconds
        serving.clock.advance(window + 1)
        serving.wait("fraud", first["id"], lambda d: d["state"] == "retired")
        late = serving.client.post(f"/api/endpoints/fraud/deployments/{second['id']}:rollback")
        assert late.status_code == 409
        assert late.json()["code"] == "rollback_window_closed"
        eventually(lambda: not hosted(serving, v1))  # unloaded once nothing holds it
        assert hosted(serving, v2)

    def test_nothing_to_roll_back_to(self, serving: Serving) -> None:
        v1 = serving.publish("acme/fraud", "1")
        serving.endpoint("fraud")
        first = serving.deploy("fraud", [(v1, 100)])
        response = serving.client.post(f"/api/endpoints/fraud/deployments/{first['id']}:rollback")
        assert response.status_code == 409
        assert response.json()["code"] == "nothing_to_roll_back_to"


@pytest.mark.parametrize("weights", [(100, 0)])
def test_a_zero_weight_version_is_loaded_but_never_chosen(
    serving: Serving, weights: tuple[int, int]
) -> None:
    v1 = serving.publish("acme/fraud", "1")
    v2 = serving.publish("acme/fraud", "2", model=add_constant(2.0))
    serving.endpoint("fraud")
    deployment = serving.deploy("fraud", [(v1, weights[0]), (v2, weights[1])])
    assert [v["state"] for v in deployment["versions"]] == ["ready", "ready"]
    assert {serving.predict("fraud").json()["model_version"] for _ in range(30)} == {"1"}
