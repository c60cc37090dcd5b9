"""POST /api/endpoints/{name}:predict: both request forms, schema errors, metering of the
version that answered, fallback provenance, and idempotency keys (on both databases)."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import pytest
from sqlalchemy import select

from modelport.store.tables import IdempotencyKeyRow
from tests.serving.conftest import ROW, Serving, add_constant, failing, slow


@pytest.fixture
def fraud(serving: Serving) -> Serving:
    v1 = serving.publish("acme/fraud", "1")
    serving.endpoint("fraud")
    serving.deploy("fraud", [(v1, 100)])
    return serving


def billed(serving: Serving) -> list[Any]:
    serving.services.metering.deliver()
    return [
        e.event for e in serving.services.metering.ledger.entries() if e.event.unit == "prediction"
    ]


class TestForms:
    def test_tensor_form(self, fraud: Serving) -> None:
        body = {
            "id": "req-1",
            "inputs": [{"name": "x", "datatype": "FP32", "shape": [2, 4], "data": [0] * 8}],
            "outputs": [{"name": "y"}],
        }
        answer = fraud.predict("fraud", body).json()
        assert answer["id"] == "req-1"
        assert answer["outputs"] == [
            {"name": "y", "datatype": "FP32", "shape": [2, 4], "data": [1.0] * 8}
        ]
        assert answer["endpoint"] == "fraud" and answer["model"] == "acme/fraud"
        assert answer["backend"] == "local:acme/fraud:1"
        assert answer["fallback"] is None
        assert len(answer["prediction_id"]) == 32

    def test_simple_form(self, fraud: Serving) -> None:
        answer = fraud.predict("fraud", {"inputs": {"x": [[0, 0, 0, 0], ROW[0]]}}).json()
        assert answer["outputs"] == {"y": [[1.0, 1.0, 1.0, 1.0], [2.0, 3.0, 4.0, 5.0]]}

    @pytest.mark.parametrize(
        ("body", "code"),
        [
            ({"inputs": {"z": ROW}}, "invalid_input"),
            ({"inputs": {}}, "invalid_input"),
            ({"inputs": {"x": [[1, 2, 3]]}}, "invalid_input"),
            ({"inputs": {"x": [[1, 2, 3, 4], [1]]}}, "invalid_tensor_data"),
            ({"inputs": {"x": [["a", "b", "c", "d"]]}}, "invalid_tensor_data"),
            (
                {"inputs": [{"name": "x", "datatype": "FP64", "shape": [1, 4], "data": ROW}]},
                "invalid_input",
            ),
            (
                {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 3], "data": [1, 2, 3]}]},
                "invalid_input",
            ),
            ({"inputs": {"x": ROW}, "outputs": ["nope"]}, "unknown_output"),
            ({"inputs": {"x": ROW}, "subject": 7}, "invalid_request"),
            ({"inputs": {"x": ROW}, "parameters": {"priority": "urgent"}}, "invalid_priority"),
            ({"inputs": "x"}, "invalid_request"),
            ([1, 2], "invalid_request"),
        ],
    )
    def test_requests_that_do_not_fit_the_schema(
        self, fraud: Serving, body: Any, code: str
    ) -> None:
        response = fraud.predict("fraud", body)
        assert response.status_code == 400, response.text
        assert response.json()["code"] == code

    def test_bad_json_and_timeout(self, fraud: Serving) -> None:
        response = fraud.client.post("/api/endpoints/fraud:predict", content=b"{nope")
        assert response.json()["code"] == "invalid_json"
        response = fraud.predict("fraud", headers={"Inference-Timeout": "soon"})
        assert response.json()["code"] == "invalid_timeout"
        assert fraud.predict("fraud", headers={"Inference-Timeout": "5"}).status_code == 200

    def test_nothing_is_billed_for_refused_requests(self, fraud: Serving) -> None:
        assert fraud.predict("fraud", {"inputs": {"x": [[1]]}}).status_code == 400
        assert billed(fraud) == []


def test_every_prediction_is_metered_once_with_its_id_and_version(serving: Serving) -> None:
    v1 = serving.publish("acme/fraud", "1")
    v2 = serving.publish("acme/fraud", "2", model=add_constant(2.0))
    serving.endpoint("fraud")
    serving.deploy("fraud", [(v1, 50), (v2, 50)])
    answers = {}
    for _ in range(20):
        answer = serving.predict("fraud").json()
        answers[answer["prediction_id"]] = answer["model_version"]
    events = billed(serving)
    assert {e.prediction_id: e.version for e in events} == answers
    assert {e.endpoint for e in events} == {"fraud"}


class TestFallback:
    def test_a_fallback_version_answers_with_provenance_and_is_billed(
        self, serving: Serving
    ) -> None:
        serving.publish("acme/fraud", "2", model=failing())
        serving.publish("acme/fraud", "3", model=add_constant(3.0))
        chain = {"steps": [{"kind": "version", "model": "acme/fraud", "version": "3"}]}
        serving.endpoint("fraud", fallback=chain)
        deployment = serving.deploy("fraud", [("acme/fraud:2", 100)])
        assert [f["state"] for f in deployment["fallback_versions"]] == ["ready"]
        answer = serving.predict("fraud").json()
        assert answer["model_version"] == "3"
        assert answer["outputs"] == {"y": [[4.0, 5.0, 6.0, 7.0]]}
        assert answer["fallback"]["kind"] == "version"
        assert answer["fallback"]["chosen"] == "acme/fraud:2"
        assert answer["fallback"]["reason"] == "execution_failed"
        assert [(e.version, e.prediction_id) for e in billed(serving)] == [
            ("3", answer["prediction_id"])
        ]

    def test_a_static_answer(self, serving: Serving) -> None:
        serving.publish("acme/fraud", "2", model=failing())
        static = {"name": "y", "datatype": "FP32", "shape": [1, 4], "data": [0, 0, 0, 0]}
        serving.endpoint("fraud", fallback={"steps": [{"kind": "static", "outputs": [static]}]})
        serving.deploy("fraud", [("acme/fraud:2", 100)])
        answer = serving.predict("fraud").json()
        assert answer["fallback"]["kind"] == "static"
        assert answer["model_version"] is None
        assert answer["outputs"] == {"y": [[0.0, 0.0, 0.0, 0.0]]}

    def test_an_incompatible_fallback_refuses_the_deployment(self, serving: Serving) -> None:
        serving.publish("acme/fraud", "1")
        wide = [{"name": "x", "datatype": "FP32", "shape": [-1, 8]}]
        serving.publish("acme/fraud", "3", inputs=wide)
        chain = {"steps": [{"kind": "version", "model": "acme/fraud", "version": "3"}]}
        serving.endpoint("fraud", fallback=chain)
        body = {"versions": [{"model": "acme/fraud", "version": "1", "weight": 100}]}
        response = serving.client.post("/api/endpoints/fraud/deployments", json=body)
        assert response.status_code == 422
        assert response.json()["code"] == "incompatible_schema"


class TestIdempotency:
    KEY = {"Idempotency-Key": "order-42"}

    def test_a_repeat_gets_the_first_answer_billed_once(self, serving_db: Serving) -> None:
        v1 = serving_db.publish("acme/fraud", "1")
        serving_db.endpoint("fraud")
        serving_db.deploy("fraud", [(v1, 100)])
        first = serving_db.predict("fraud", headers=self.KEY)
        again = serving_db.predict("fraud", headers=self.KEY)
        assert first.status_code == again.status_code == 200
        assert again.json() == first.json()
        assert again.headers["Idempotent-Replayed"] == "true"
        assert "Idempotent-Replayed" not in first.headers
        assert [e.prediction_id for e in billed(serving_db)] == [first.json()["prediction_id"]]
        other = serving_db.predict("fraud", {"inputs": {"x": [[0, 0, 0, 0]]}}, headers=self.KEY)
        assert other.status_code == 422
        assert other.json()["code"] == "idempotency_key_reused"
        fresh = serving_db.predict("fraud", headers={"Idempotency-Key": "order-43"})
        assert fresh.json()["prediction_id"] != first.json()["prediction_id"]

    def test_concurrent_duplicates_wait_for_the_first(self, serving_db: Serving) -> None:
        v1 = serving_db.publish("acme/fraud", "1", model=slow(512))
        serving_db.endpoint("fraud")
        deployment = serving_db.deploy("fraud", [(v1, 100)])
        answers: list[dict[str, Any]] = []

        def call() -> None:
            response = serving_db.predict("fraud", headers=self.KEY)
            assert response.status_code == 200, response.text
            answers.append(response.json())

        threads = [threading.Thread(target=call) for _ in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert len(answers) == 6
        assert len({a["prediction_id"] for a in answers}) == 1
        assert len(billed(serving_db)) == 1
        stats = serving_db.deployment("fraud", deployment["id"])["versions"][0]["traffic"]
        assert stats["requests"] == 1  # the model ran once

    def test_a_failed_first_request_releases_its_key(self, serving: Serving) -> None:
        serving.publish("acme/fraud", "1", model=failing())
        serving.endpoint("fraud")
        serving.deploy("fraud", [("acme/fraud:1", 100)])
        assert serving.predict("fraud", headers=self.KEY).status_code == 500
        with serving.services.database.transaction() as session:
            assert session.scalars(select(IdempotencyKeyRow)).all() == []
        assert serving.predict("fraud", headers=self.KEY).status_code == 500  # ran again
        assert Counter(e.status.value for e in billed(serving)) == Counter({"failed": 2})

    def test_keys_are_per_endpoint_and_expire(self, serving: Serving) -> None:
        v1 = serving.publish("acme/fraud", "1")
        serving.endpoint("fraud")
        serving.endpoint("other")
        serving.deploy("fraud", [(v1, 100)])
        serving.deploy("other", [(v1, 100)])
        first = serving.predict("fraud", headers=self.KEY).json()["prediction_id"]
        elsewhere = serving.predict("other", headers=self.KEY).json()["prediction_id"]
        assert elsewhere != first
        assert serving.predict("fraud", headers=self.KEY).json()["prediction_id"] == first
        serving.clock.advance(serving.services.settings.serving.idempotency_window_seconds + 1)
        assert serving.predict("fraud", headers=self.KEY).json()["prediction_id"] != first
        assert serving.services.serving.idempotency.purge() == 1  # the other endpoint's

    def test_malformed_keys(self, fraud: Serving) -> None:
        for key in ("x" * 256, "with space"):
            response = fraud.predict("fraud", headers={"Idempotency-Key": key})
            assert response.status_code == 400
            assert response.json()["code"] == "invalid_idempotency_key"


def test_predictions_are_logged_with_the_chosen_version_and_arm(serving: Serving) -> None:
    v1 = serving.publish("acme/fraud", "1")
    v2 = serving.publish("acme/fraud", "2", model=failing())
    serving.endpoint("fraud", log={"inputs": True, "outputs": True})
    serving.deploy("fraud", [(v1, 50), (v2, 50)])
    seen: dict[str, dict[str, Any]] = {}
    while len(seen) < 2:
        response = serving.predict("fraud")
        if response.status_code == 200:
            seen.setdefault("1", response.json())
        else:
            seen.setdefault("2", response.json())
    ok = serving.client.get(f"/api/predictions/{seen['1']['prediction_id']}").json()
    assert (ok["version"], ok["arm"], ok["status"], ok["endpoint"]) == (
        "1",
        "stable",
        "ok",
        "fraud",
    )
    assert ok["inputs"][0]["name"] == "x" and ok["outputs"][0]["name"] == "y"
    logged = serving.services.outcomes.predictions.list(endpoint="fraud")
    failed = [p for p in logged if p.status != "ok"]
    assert {(p.version, p.arm, p.status) for p in failed} == {
        ("2", "candidate", "execution_failed")
    }
