"""Publishers' pre- and post-processing, end to end: a real package (a tokenizer, an ONNX
model, a label mapping) called through ``/v2`` and through an endpoint, its code run in
warm sandboxed workers; code that crashes, hangs or pries answers 500 or 504 with a
stable code and the server goes on."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from modelport.sandbox import isolation_available
from tests.conftest import ADMIN_KEY, skip_or_fail
from tests.polling import eventually
from tests.registry.helpers import put_blob
from tests.serving.conftest import Serving, ServingFactory
from tests.serving.processing_package import (
    EXAMPLE,
    OUTPUTS,
    TEXT,
    package_files,
    processing_section,
)

pytestmark = pytest.mark.slow  # each version's code runs in sandboxed worker processes

REF = "acme/sentiment"


def publish(serving: Serving, version: str = "1", **processing: Any) -> str:
    """Publish the sentiment package as ``REF:version``, approved."""
    registry = serving.services.registry
    try:
        registry.get_model("acme", "sentiment")
    except Exception:
        registry.create_model("acme", "sentiment", actor="test", license="MIT")
    files = []
    for path, data in package_files().items():
        digest = put_blob(serving.services.blob_store, data)
        files.append({"path": path, "digest": digest, "size": len(data)})
    manifest = {
        "format": "onnx",
        "files": files,
        "inputs": TEXT,
        "outputs": OUTPUTS,
        "license": "MIT",
        "examples": [EXAMPLE],
        "processing": processing_section(**processing),
    }
    registry.publish("acme", "sentiment", version, manifest, actor="test")
    serving.force_state("acme", "sentiment", version, "approved")
    return f"{REF}:{version}"


def v2(serving: Serving, texts: list[str]) -> Any:
    body = {"inputs": [{"name": "text", "datatype": "BYTES", "shape": [len(texts)], "data": texts}]}
    return serving.client.post(f"/v2/models/{REF}/versions/1/infer", json=body)


def outputs(response: Any) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    return {o["name"]: o["data"] for o in response.json()["outputs"]}


@pytest.fixture
def sentiment(make_serving: ServingFactory, database_url: str) -> Serving:
    """The package published on a fresh installation (SQLite and PostgreSQL), with a
    processing deadline short enough for the hang test (and long enough for a first call
    to start its sandboxed worker on a loaded machine: it pays the start)."""
    serving = make_serving(database_url, processing_timeout_seconds=10.0)
    publish(serving)
    return serving


def test_v2_runs_preprocess_model_and_postprocess(sentiment: Serving) -> None:
    response = v2(sentiment, ["good great", "awful bad", "ok", "nothing known"])
    got = outputs(response)
    assert got["label"] == ["positive", "negative", "neutral", "negative"]
    # softmax of [0, 0, 3] → e^3 / (e^3 + 2); of four zeros (no word known) → 1/3.
    assert got["score"][0] == pytest.approx(0.909, abs=1e-3)
    assert got["score"][3] == pytest.approx(1 / 3, abs=1e-6)
    timing = response.headers["server-timing"]
    assert timing.startswith("preprocess;dur=") and "postprocess;dur=" in timing
    # The second call reuses the warm worker of each stage's pool.
    assert outputs(v2(sentiment, ["great"]))["label"] == ["positive"]
    metrics = sentiment.client.get("/metrics").text
    assert (
        'modelport_processing_calls_total{model="acme/sentiment",outcome="ok",stage="preprocess",version="1"} 2.0'
        in metrics
    )
    assert (
        'modelport_processing_duration_seconds_count{model="acme/sentiment",stage="postprocess",version="1"} 2.0'
        in metrics
    )
    assert 'modelport_processing_workers_started_total{model="acme/sentiment",version="1"} 1.0' in metrics  # fmt: skip


def test_an_endpoint_runs_the_processing_too(sentiment: Serving) -> None:
    sentiment.endpoint("mood")
    sentiment.deploy("mood", [(f"{REF}:1", 100)])
    response = sentiment.predict("mood", {"inputs": {"text": ["awful", "good ok good"]}})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["outputs"]["label"] == ["negative", "positive"]
    assert body["model_version"] == "1"
    # /v2 by the endpoint's name goes the same way.
    call = {"inputs": [{"name": "text", "datatype": "BYTES", "shape": [1], "data": ["ok"]}]}
    answer = sentiment.client.post("/v2/models/mood/infer", json=call)
    assert outputs(answer)["label"] == ["neutral"]


@pytest.mark.parametrize("word", ["raise", "exit", "sysexit"])
def test_a_crash_in_the_code_is_a_500_and_the_next_call_works(
    sentiment: Serving, word: str
) -> None:
    assert outputs(v2(sentiment, ["good"]))["label"] == ["positive"]
    response = v2(sentiment, [f"{word} now"])
    assert response.status_code == 500, response.text
    assert "processing" in response.json()["error"]
    error = response.json()["error"]
    if word == "raise":
        assert "ValueError: cannot tokenize raise now" in error
    elif word == "exit":
        assert "exited with status 3" in error
        assert "PRINTED" not in error  # the worker's log stays in the server's log
    else:
        assert "exited with status 4" in error
    # On the endpoint surface the stable code is in the problem document.
    sentiment.endpoint("mood")
    sentiment.deploy("mood", [(f"{REF}:1", 100)])
    problem = sentiment.predict("mood", {"inputs": {"text": [f"{word} again"]}})
    assert problem.status_code == 500
    assert problem.json()["code"] == "processing_failed"
    # The worker was replaced: the server and the version answer again.
    assert outputs(v2(sentiment, ["bad"]))["label"] == ["negative"]
    metrics = sentiment.client.get("/metrics").text
    assert 'outcome="processing_failed",stage="preprocess"' in metrics


def test_code_that_hangs_is_stopped_at_its_deadline_with_a_504(sentiment: Serving) -> None:
    sentiment.endpoint("mood")
    sentiment.deploy("mood", [(f"{REF}:1", 100)])
    problem = sentiment.predict("mood", {"inputs": {"text": ["hang forever"]}})
    assert problem.status_code == 504, problem.text
    assert problem.json()["code"] == "processing_timeout"
    assert outputs(v2(sentiment, ["great"]))["label"] == ["positive"]


def test_code_left_spinning_after_its_call_is_reaped_and_reported(
    make_serving: ServingFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="modelport.serving.processing")
    serving = make_serving(
        processing_timeout_seconds=10.0,
        processing_idle_cpu_seconds=0.2,
        processing_idle_seconds=600,
        processing_reap_interval_seconds=3600,  # reaped below, by hand
    )
    publish(serving)
    processing = serving.services.processing
    assert processing is not None
    assert outputs(v2(serving, ["spin good"]))["label"] == ["positive"]
    assert eventually(lambda: processing.reap() == ["idle_cpu"], seconds=60)
    # The call that follows runs on a fresh worker.
    assert outputs(v2(serving, ["great"]))["label"] == ["positive"]
    [event] = [r for r in caplog.records if getattr(r, "event", None) == "processing.worker_reaped"]
    assert event.levelno == logging.WARNING
    assert event.fields["reason"] == "idle_cpu"  # type: ignore[attr-defined]
    assert event.fields["idle_cpu_seconds"] >= 0.2  # type: ignore[attr-defined]  (rounded)
    # Unused for the idle time (the services' clock), it is stopped too.
    serving.clock.advance(600)
    assert processing.reap() == ["idle"]
    metrics = serving.client.get("/metrics").text
    labels = 'model="acme/sentiment",reason="{}",version="1"'
    assert (
        f"modelport_processing_workers_reaped_total{{{labels.format('idle_cpu')}}} 1.0" in metrics
    )
    assert f"modelport_processing_workers_reaped_total{{{labels.format('idle')}}} 1.0" in metrics
    assert 'modelport_processing_workers_started_total{model="acme/sentiment",version="1"} 2.0' in metrics  # fmt: skip
    assert outputs(v2(serving, ["ok"]))["label"] == ["neutral"]


def test_the_code_sees_no_secret_no_network_no_server_file_and_no_other_package(
    make_serving: ServingFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not isolation_available():
        skip_or_fail("the isolation checks need bubblewrap")
    monkeypatch.setenv("MODELPORT_ADMIN_KEY", ADMIN_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-secret-" + "k" * 20)
    serving = make_serving()
    publish(serving)
    home = serving.services.settings.store.home
    database = str(home / "modelport.db")
    response = v2(serving, ["probe", database])
    assert response.status_code == 500
    message = response.json()["error"]
    seen, _ = json.JSONDecoder().raw_decode(message[message.index("PROBE") + 5 :])
    assert "MODELPORT_ADMIN_KEY" not in seen["environ"]
    assert "AWS_SECRET_ACCESS_KEY" not in seen["environ"]
    assert ADMIN_KEY not in message
    assert seen["socket"].startswith("refused")
    assert seen["import"].startswith("refused") and "standard library, numpy" in seen["import"]
    assert seen[database].startswith("refused")


def test_code_that_returns_the_wrong_tensors_is_a_500(make_serving: ServingFactory) -> None:
    serving = make_serving()
    publish(serving, postprocess="labels:wrong_names")  # no label, no score
    response = v2(serving, ["good"])
    assert response.status_code == 500
    assert "returned no tensor" in response.json()["error"]


def test_code_that_cannot_be_imported_is_a_500(make_serving: ServingFactory) -> None:
    serving = make_serving()
    publish(serving, postprocess="labels:missing_function")
    response = v2(serving, ["good"])
    assert response.status_code == 500
    assert "failed to load" in response.json()["error"]
    assert "missing_function" in response.json()["error"]


def test_without_isolation_the_processing_fails_closed(make_serving: ServingFactory) -> None:
    serving = make_serving(sandbox="bubblewrap", sandbox_bwrap="no-such-bwrap")
    publish(serving)
    response = v2(serving, ["good"])
    assert response.status_code == 503
    assert "bubblewrap" in response.json()["error"]


def test_unisolated_by_the_operators_choice_the_processing_runs(
    make_serving: ServingFactory,
) -> None:
    serving = make_serving(sandbox="unisolated", sandbox_bwrap="no-such-bwrap")
    publish(serving)
    assert outputs(v2(serving, ["awful"]))["label"] == ["negative"]


def test_a_worker_process_runs_the_processing_of_the_calls_it_is_forwarded(
    make_serving: ServingFactory,
) -> None:
    """In the distributed shape the gateway hosts nothing: its worker, where the model
    runs, runs the code too."""
    from fastapi.testclient import TestClient

    from modelport.api.worker import create_worker_app
    from modelport.app import build_worker_services
    from modelport.config import Role

    serving = make_serving()
    publish(serving)
    settings = serving.services.settings.model_copy(update={"role": Role.WORKER})
    services = build_worker_services(settings)
    try:
        headers = {"Authorization": f"Bearer {ADMIN_KEY}"}
        with TestClient(create_worker_app(services), headers=headers) as client:
            body = {"inputs": [{"name": "text", "datatype": "BYTES", "shape": [1], "data": ["ok"]}]}
            answer = client.post(f"/v2/models/{REF}/versions/1/infer", json=body)
            assert outputs(answer)["label"] == ["neutral"]
            crash = {
                "inputs": [{"name": "text", "datatype": "BYTES", "shape": [1], "data": ["exit"]}]
            }
            failed = client.post(f"/v2/models/{REF}/versions/1/infer", json=crash)
            assert failed.status_code == 500
            assert failed.json()["code"] == "processing_failed"
            assert len(list((settings.store.home / "processing").iterdir())) == 1
    finally:
        services.close()
    assert list((settings.store.home / "processing").iterdir()) == []  # removed with its workers
