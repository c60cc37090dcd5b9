"""The prediction log on SQLite and PostgreSQL: records written off the request path,
buffer pressure (audit fields kept, detail sampled and counted, overflow counted),
retries without duplicates, outcome joins and the accuracy report, and the API."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from prometheus_client import CollectorRegistry
from starlette.testclient import TestClient

from modelport.app import Services
from modelport.errors import Conflict, InvalidInput, NotFound
from modelport.observability.prediction_store import PredictionRepository
from modelport.observability.predictions import PredictionLog, answer_of, detail_fields
from modelport.observability.serving_metrics import ServingMetrics
from modelport.observability.types import LogPolicy, PredictionRecord
from modelport.serving.outcomes import OutcomeService
from modelport.store import Database, create_database, upgrade
from tests.conftest import ADMIN_KEY

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
X = np.array([[1, 2, 3, 4]], dtype=np.float32)


@pytest.fixture
def database(database_url: str) -> Iterator[Database]:
    if database_url.startswith("sqlite"):
        upgrade(database_url)
    built = create_database(database_url)
    yield built
    built.dispose()


def record(
    n: int,
    *,
    policy: LogPolicy | None = None,
    endpoint: str = "fraud",
    **fields: Any,
) -> PredictionRecord:
    detail = detail_fields(policy or LogPolicy(inputs=True, outputs=True), {"x": X}, {"y": X + 1})
    base: dict[str, Any] = {
        "id": f"p{n:05d}",
        "endpoint": endpoint,
        "owner": "acme",
        "model": "acme/adder",
        "version": "1",
        "backend": "local",
        "received_at": NOW + timedelta(seconds=n),
        "latency_seconds": 0.004,
        "stages": {"auth": 0.001, "queue": 0.001, "execute": 0.002},
        "tenant": "globex",
        "key_id": "k1",
        "request_id": f"r{n}",
        "arm": "stable",
    }
    return PredictionRecord(**(base | detail | fields))


def counter(metrics: ServingMetrics, name: str, **labels: str) -> float:
    return metrics.registry.get_sample_value(name, labels) or 0.0


def test_records_are_written_with_every_audit_field_and_detail(database: Database) -> None:
    repo = PredictionRepository(database)
    log = PredictionLog(repo)
    first = record(1, fallback="cache", shadow_of=None, answer_label="2", answer_value=None)
    assert log.record(first)
    assert log.pending("p00001") is first
    assert asyncio.run(log.flush()) == 1
    stored = repo.get("p00001")
    assert stored is not None
    assert (stored.endpoint, stored.owner, stored.model, stored.version) == (
        "fraud",
        "acme",
        "acme/adder",
        "1",
    )
    assert (stored.backend, stored.tenant, stored.key_id, stored.request_id) == (
        "local",
        "globex",
        "k1",
        "r1",
    )
    assert stored.received_at == NOW + timedelta(seconds=1)
    assert stored.stages == {"auth": 0.001, "queue": 0.001, "execute": 0.002}
    assert (stored.fallback, stored.arm, stored.answer_label) == ("cache", "stable", "2")
    assert stored.detail == "logged"
    assert stored.inputs == [
        {"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1.0, 2.0, 3.0, 4.0]}
    ]
    assert stored.outputs is not None and stored.outputs[0]["data"] == [2.0, 3.0, 4.0, 5.0]


def test_the_logging_policy_decides_what_detail_is_kept(database: Database) -> None:
    repo = PredictionRepository(database)
    log = PredictionLog(repo)
    log.record(record(1, policy=LogPolicy()))
    log.record(record(2, policy=LogPolicy(outputs=True)))
    log.record(record(3, policy=LogPolicy(inputs=True, outputs=True, max_bytes=8)))
    asyncio.run(log.flush())
    none, outputs_only, too_large = (repo.get(f"p0000{i}") for i in (1, 2, 3))
    assert none is not None and (none.detail, none.inputs, none.outputs) == ("none", None, None)
    assert outputs_only is not None and outputs_only.inputs is None
    assert outputs_only.outputs is not None
    assert too_large is not None and too_large.detail == "too_large"
    assert too_large.inputs is None and too_large.outputs is None


def test_under_buffer_pressure_audit_fields_are_kept_and_detail_is_sampled(
    database: Database,
) -> None:
    metrics = ServingMetrics(CollectorRegistry())
    repo = PredictionRepository(database)
    log = PredictionLog(
        repo, capacity=30, detail_capacity=10, pressure_sample_every=5, metrics=metrics
    )
    # The writer is not running (the database is slow): the buffer fills.
    results = [log.record(record(n)) for n in range(40)]
    assert results == [True] * 30 + [False] * 10
    assert log.depth == 30
    # 10 records before pressure keep detail; of the 20 under pressure 1 in 5 does.
    assert log.sampled_out == 16
    assert log.dropped == 10
    assert counter(metrics, "modelport_prediction_log_detail_sampled_out_total") == 16
    assert counter(metrics, "modelport_prediction_log_records_total", result="dropped") == 10
    assert counter(metrics, "modelport_prediction_log_buffer_depth") == 30

    assert asyncio.run(log.flush()) == 30
    assert counter(metrics, "modelport_prediction_log_records_total", result="written") == 30
    stored = [repo.get(f"p{n:05d}") for n in range(30)]
    assert all(s is not None for s in stored)
    details = [s.detail for s in stored if s is not None]
    assert details == ["logged"] * 10 + (["logged"] + ["sampled_out"] * 4) * 4
    for s in stored:
        assert s is not None
        # Required audit fields survive whatever happened to the detail.
        assert s.endpoint == "fraud" and s.model == "acme/adder" and s.tenant == "globex"
        assert s.latency_seconds == 0.004 and s.stages["execute"] == 0.002
        assert (s.inputs is None) == (s.detail == "sampled_out")
    assert repo.get("p00035") is None, "dropped when full"
    # Pressure gone: detail is kept again.
    log.record(record(100))
    asyncio.run(log.flush())
    later = repo.get("p00100")
    assert later is not None and later.detail == "logged"


class FlakySink:
    """Fails the first ``failures`` batches after writing them (a lost acknowledgement)."""

    def __init__(self, repo: PredictionRepository, failures: int) -> None:
        self.repo = repo
        self.failures = failures
        self.batches: list[int] = []

    def insert(self, records: Sequence[PredictionRecord]) -> int:
        self.batches.append(len(records))
        written = self.repo.insert(records)
        if self.failures:
            self.failures -= 1
            raise ConnectionError("connection lost after commit")
        return written


def test_a_failed_batch_is_retried_and_never_duplicated(database: Database) -> None:
    repo = PredictionRepository(database)
    sink = FlakySink(repo, failures=1)
    metrics = ServingMetrics(CollectorRegistry())
    log = PredictionLog(sink, batch_size=4, metrics=metrics)
    for n in range(6):
        log.record(record(n))
    with pytest.raises(ConnectionError):
        asyncio.run(log.flush())
    assert log.depth == 6, "the failed batch went back to the buffer"
    assert asyncio.run(log.flush()) == 6
    assert sink.batches == [4, 4, 2]
    assert counter(metrics, "modelport_prediction_log_write_errors_total") == 1
    assert len(repo.list(endpoint="fraud", limit=100)) == 6


def test_the_background_writer_flushes_off_the_request_path(database: Database) -> None:
    repo = PredictionRepository(database)
    log = PredictionLog(repo, batch_size=5, flush_interval=30.0)

    async def scenario() -> None:
        async with log.running():
            for n in range(5):  # a full batch wakes the writer at once
                log.record(record(n))
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                if log.depth == 0 and log.written == 5:
                    break
                await asyncio.sleep(0.01)
            assert log.written == 5
            # Records from another thread (a sync route) are fine too.
            thread = threading.Thread(target=lambda: log.record(record(9)))
            thread.start()
            thread.join()
        # Leaving the block flushes what is left.

    asyncio.run(scenario())
    assert repo.get("p00009") is not None


@pytest.mark.parametrize(
    ("outputs", "labels", "answer"),
    [
        ({"probabilities": np.array([[0.1, 0.7, 0.2]], np.float32)}, None, ("1", None)),
        ({"probabilities": np.array([0.1, 0.2, 0.7], np.float32)}, ["a", "b", "c"], ("c", None)),
        ({"class": np.array([[2]], np.int64)}, ["a", "b", "c"], ("c", 2.0)),
        ({"price": np.array([[3.5]], np.float32)}, None, (None, 3.5)),
        ({"label": np.array([b"spam"], dtype=object)}, None, ("spam", None)),
        ({"probabilities": np.ones((2, 3), np.float32)}, None, (None, None)),
        ({}, None, (None, None)),
    ],
)
def test_answer_of(
    outputs: dict[str, np.ndarray], labels: list[str] | None, answer: tuple[Any, Any]
) -> None:
    assert answer_of(outputs, labels) == answer


# ---- outcomes ---------------------------------------------------------------------


def test_outcomes_are_idempotent_per_prediction(database: Database) -> None:
    repo = PredictionRepository(database)
    service = OutcomeService(database, repo, PredictionLog(repo))
    outcome, created = service.attach("p1", label="fraud", actor="alice")
    assert created and outcome.label == "fraud" and outcome.recorded_by == "alice"
    again, created_again = service.attach("p1", label="fraud", actor="bob")
    assert not created_again and again.recorded_by == "alice"
    with pytest.raises(Conflict) as caught:
        service.attach("p1", label="legit", actor="alice")
    assert caught.value.code == "outcome_conflict"
    with pytest.raises(InvalidInput):
        service.attach("p2", label="x", value=1.0, actor="alice")
    with pytest.raises(InvalidInput):
        service.attach("p2", value=float("nan"), actor="alice")
    assert service.attach("p3", label=True, actor="a")[0].label == "1"


def test_a_prediction_still_in_the_buffer_can_take_an_outcome_at_once(database: Database) -> None:
    repo = PredictionRepository(database)
    log = PredictionLog(repo)
    service = OutcomeService(database, repo, log)
    log.record(record(7))
    found = asyncio.run(service.find_prediction("p00007"))
    assert found.id == "p00007" and log.depth == 0
    with pytest.raises(NotFound):
        asyncio.run(service.find_prediction("p99999"))


def test_accuracy_report_joins_outcomes_per_version_arm_and_shadow(database: Database) -> None:
    repo = PredictionRepository(database)
    service = OutcomeService(database, repo, PredictionLog(repo))
    records = [
        # stable v1: labels 1, 1, 0 -> outcomes 1, 0, 0: 2 of 3 right
        record(1, version="1", answer_label="1"),
        record(2, version="1", answer_label="1"),
        record(3, version="1", answer_label="0"),
        record(4, version="1", answer_label="0"),  # no outcome yet
        # canary v2 on the same endpoint
        record(5, version="2", arm="canary", answer_label="1"),
        # shadow copies of 1 and 2 by v3, judged against their outcomes
        record(6, version="3", arm=None, shadow_of="p00001", answer_label="0"),
        record(7, version="3", arm=None, shadow_of="p00002", answer_label="0"),
        # a regression version: numeric answers
        record(8, model="acme/price", version="1", answer_value=10.0),
        record(9, model="acme/price", version="1", answer_value=4.0),
        # not counted: failed, another endpoint, another owner
        record(10, version="1", answer_label="1", status="backend_unreachable"),
        record(11, version="1", answer_label="1", endpoint="other"),
        record(12, version="1", answer_label="1", owner="initech"),
    ]
    repo.insert(records)
    for pid, label in (("p00001", "1"), ("p00002", "0"), ("p00003", "0"), ("p00005", "1")):
        service.attach(pid, label=label, actor="labeler")
    service.attach("p00008", value=12.0, actor="labeler")
    service.attach("p00009", value=3.0, actor="labeler")
    for pid in ("p00010", "p00011", "p00012"):
        service.attach(pid, label="0", actor="labeler")

    rows = {(r.model, r.version, r.arm, r.shadow): r for r in service.report("fraud", owner="acme")}
    v1 = rows[("acme/adder", "1", "stable", False)]
    assert (v1.predictions, v1.outcomes, v1.labelled, v1.correct) == (4, 3, 3, 2)
    assert v1.accuracy == pytest.approx(2 / 3) and v1.mae is None
    v2 = rows[("acme/adder", "2", "canary", False)]
    assert (v2.predictions, v2.outcomes, v2.accuracy) == (1, 1, 1.0)
    shadow = rows[("acme/adder", "3", None, True)]
    assert (shadow.predictions, shadow.outcomes, shadow.correct) == (2, 2, 1)
    price = rows[("acme/price", "1", "stable", False)]
    assert (price.numeric, price.mae, price.accuracy) == (2, pytest.approx(1.5), None)
    assert len(rows) == 4
    # A time window
    recent = service.report("fraud", owner="acme", since=NOW + timedelta(seconds=5))
    assert {(r.version, r.shadow) for r in recent} == {("2", False), ("3", True), ("1", False)}


# ---- the API ----------------------------------------------------------------------


def seed(services: Services, *records: PredictionRecord) -> None:
    for item in records:
        assert services.prediction_log.record(item)


def test_outcome_api_is_idempotent_and_feeds_the_report(
    services: Services, client: TestClient
) -> None:
    services.tenancy.create_tenant("acme", actor="admin")
    created = client.post("/api/endpoints", json={"name": "fraud", "tenant": "acme"})
    assert created.status_code == 201, created.text
    seed(
        services,
        record(1, answer_label="1"),
        record(2, answer_label="0"),
        record(3, model="acme/price", answer_value=2.0),
    )
    first = client.post("/api/predictions/p00001/outcome", json={"label": 1})
    assert first.status_code == 201, first.text
    assert first.json()["label"] == "1"
    assert client.post("/api/predictions/p00001/outcome", json={"label": "1"}).status_code == 200
    conflict = client.post("/api/predictions/p00001/outcome", json={"label": "0"})
    assert conflict.status_code == 409
    assert conflict.json()["code"] == "outcome_conflict"
    assert client.post("/api/predictions/p00002/outcome", json={"label": "1"}).status_code == 201
    assert client.post("/api/predictions/p00003/outcome", json={"value": 2.5}).status_code == 201
    bad = client.post("/api/predictions/p00003/outcome", json={"label": "1", "value": 1})
    assert bad.status_code == 400
    for unknown in ("nope", "with%20space", "x" * 65):
        missing = client.post(f"/api/predictions/{unknown}/outcome", json={"label": "1"})
        assert missing.status_code == 404 and missing.json()["code"] == "prediction_not_found"

    shown = client.get("/api/predictions/p00001")
    assert shown.status_code == 200
    body = shown.json()
    assert body["outcome"]["label"] == "1" and body["answer"] == {"label": "1", "value": None}
    assert body["inputs"][0]["name"] == "x"

    report = client.get("/api/endpoints/fraud/outcomes")
    assert report.status_code == 200, report.text
    versions = {(v["model"], v["version"]): v for v in report.json()["versions"]}
    adder = versions[("acme/adder", "1")]
    assert (adder["predictions"], adder["outcomes"], adder["correct"]) == (2, 2, 1)
    assert adder["accuracy"] == 0.5
    assert versions[("acme/price", "1")]["mae"] == 0.5
    for unknown in ("nothing", "with%20space", "UPPER"):
        assert client.get(f"/api/endpoints/{unknown}/outcomes").status_code == 404


def test_outcome_api_access_follows_the_callers_and_the_endpoints_tenants(
    services: Services, anon_client: TestClient
) -> None:
    for slug in ("acme", "globex", "initech"):
        services.tenancy.create_tenant(slug, actor="admin")
    admin = {"Authorization": f"Bearer {ADMIN_KEY}"}
    created = anon_client.post(
        "/api/endpoints", json={"name": "fraud", "tenant": "acme"}, headers=admin
    )
    assert created.status_code == 201

    def key(tenant: str, member: str, roles: list[str]) -> dict[str, str]:
        services.tenancy.add_member(tenant, member, roles=roles, actor="admin")
        issued = services.tenancy.create_key(tenant, member, name="k", actor="admin")
        return {"Authorization": f"Bearer {issued.secret}"}

    caller = key("globex", "app", ["consumer"])
    deployer = key("acme", "ops", ["deployer"])
    publisher = key("acme", "pub", ["publisher"])
    stranger = key("initech", "eve", ["owner"])
    seed(services, *(record(n, answer_label="1") for n in range(1, 5)))
    url = "/api/predictions/p0000{}/outcome"
    assert anon_client.post(url.format(1), json={"label": "1"}).status_code == 401
    assert anon_client.post(url.format(1), json={"label": "1"}, headers=caller).status_code == 201
    assert anon_client.post(url.format(2), json={"label": "1"}, headers=deployer).status_code == 201
    assert (
        anon_client.post(url.format(3), json={"label": "1"}, headers=publisher).status_code == 403
    )
    hidden = anon_client.post(url.format(3), json={"label": "1"}, headers=stranger)
    assert hidden.status_code == 404 and hidden.json()["code"] == "prediction_not_found"
    assert anon_client.get("/api/predictions/p00004", headers=stranger).status_code == 404
    assert anon_client.get("/api/predictions/p00004", headers=publisher).status_code == 200
    assert anon_client.get("/api/endpoints/fraud/outcomes", headers=publisher).status_code == 200
    assert anon_client.get("/api/endpoints/fraud/outcomes", headers=stranger).status_code == 404


def test_the_predict_route_helper_records_who_called_and_what_answered(
    services: Services,
) -> None:
    from starlette.datastructures import State
    from starlette.requests import Request

    from modelport.api.prediction_records import log_prediction
    from modelport.serving.types import FallbackKind, Provenance
    from tests.serving.backend_support import version_ref

    class App:
        state = State({"services": services})

    request = Request(
        {
            "type": "http",
            "app": App(),
            "headers": [],
            "state": {"tenant": "globex", "key_id": "k9", "request_id": "req-1"},
        }
    )
    labels = {"postprocessing": {"labels": ["legit", "fraud", "review"]}}
    chosen = version_ref("acme/fraud", "4", **labels)
    small = version_ref("acme/fraud-small", "1", **labels)
    scores = {"y": np.array([[0.1, 0.8, 0.1, 0.0]], np.float32)}
    common: dict[str, Any] = {
        "endpoint": "fraud",
        "owner": "acme",
        "chosen": chosen,
        "inputs": {"x": X},
        "received_at": NOW,
        "latency_seconds": 0.01,
        "stages": {"auth": 0.001, "execute": 0.005},
    }
    assert log_prediction(
        request,
        prediction_id="ok-1",
        provenance=Provenance(small, "local", FallbackKind.VERSION, "backend_unreachable"),
        outputs=scores,
        arm="canary",
        policy=LogPolicy(outputs=True),
        **common,
    )
    assert log_prediction(
        request,
        prediction_id="failed-1",
        provenance=None,
        outputs=None,
        status="no_available_backend",
        **common,
    )
    asyncio.run(services.prediction_log.flush())
    repo = PredictionRepository(services.database)
    answered, failed = repo.get("ok-1"), repo.get("failed-1")
    assert answered is not None and failed is not None
    assert (answered.model, answered.version, answered.backend) == (
        "acme/fraud-small",
        "1",
        "local",
    )
    assert (answered.fallback, answered.arm, answered.answer_label) == (
        "version",
        "canary",
        "fraud",
    )
    assert (answered.tenant, answered.key_id, answered.request_id) == ("globex", "k9", "req-1")
    assert answered.inputs is None and answered.outputs is not None  # outputs only, by policy
    assert (failed.model, failed.version, failed.status) == (
        "acme/fraud",
        "4",
        "no_available_backend",
    )
    assert failed.backend is None and failed.answer_label is None and failed.detail == "none"


class GatedSink:
    """A sink whose writes wait for ``gate``; what it holds."""

    def __init__(self) -> None:
        self.rows: list[PredictionRecord] = []
        self.gate = threading.Event()
        self.entered = threading.Event()

    def insert(self, records: Sequence[PredictionRecord]) -> int:
        self.entered.set()
        assert self.gate.wait(30)
        self.rows.extend(records)
        return len(records)


def test_a_record_being_written_stays_pending_and_a_flush_waits_for_it() -> None:
    # A reader that finds neither the record in the buffer nor in the store must not
    # answer "not found" while the writer holds it: pending covers it, and a flush
    # returns only once it is stored (read your own prediction, GET /api/predictions).
    sink = GatedSink()
    log = PredictionLog(sink)
    log.record(record(1))
    writer = threading.Thread(target=lambda: asyncio.run(log.flush()))
    writer.start()
    assert sink.entered.wait(30)
    assert log.depth == 0 and log.pending("p00001") is not None
    seen: list[list[str]] = []
    reader = threading.Thread(
        target=lambda: (asyncio.run(log.flush()), seen.append([r.id for r in sink.rows]))
    )
    reader.start()
    reader.join(0.2)  # give it time to reach the writer's lock before the write ends
    sink.gate.set()
    writer.join(30)
    reader.join(30)
    assert seen == [["p00001"]]
    assert log.pending("p00001") is None
