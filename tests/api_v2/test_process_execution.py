"""/v2 against versions that execute in worker processes (``runtime.execution``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import tritonclient.http as triton
from tritonclient.utils import InferenceServerException

from modelport.testing.onnx_models import echo_text, looping_add_one
from tests.api_v2.conftest import AUTH, V2Factory, infer_body
from tests.api_v2.test_infer_routes import metric
from tests.conftest import ADMIN_KEY

pytestmark = pytest.mark.slow

PROCESS = {"runtime": {"execution": "process"}}


def test_process_and_thread_versions_answer_alike_through_tritonclient(live_v2) -> None:
    url, publisher = live_v2
    publisher.mlp("acme/scorer", version="1")
    publisher.mlp("acme/scorer", version="2", **PROCESS)
    client = triton.InferenceServerClient(url=url.removeprefix("http://"))
    features = np.random.default_rng(3).standard_normal((5, 8)).astype(np.float32)
    answers = []
    try:
        for version in ("1", "2"):
            tensor = triton.InferInput("features", [5, 8], "FP32")
            tensor.set_data_from_numpy(features, binary_data=True)
            result = client.infer(
                "acme/scorer", [tensor], model_version=version, headers=dict(AUTH)
            )
            answers.append(result.as_numpy("probabilities"))
    finally:
        client.close()
    assert answers[1].shape == (5, 3)
    np.testing.assert_array_equal(answers[0], answers[1])


def test_a_hung_call_is_a_504_and_the_next_call_succeeds(make_v2: V2Factory) -> None:
    client, services, publisher = make_v2()
    publisher.publish(
        "acme/spinner",
        "1",
        looping_add_one(),
        inputs=[
            {"name": "x", "datatype": "FP32", "shape": [-1, 4]},
            {"name": "steps", "datatype": "INT64", "shape": [-1]},
        ],
        outputs=[{"name": "y", "datatype": "FP32", "shape": [-1, 4]}],
        **PROCESS,
    )
    x = np.ones((1, 4), np.float32)

    def call(steps: int, **headers: str):  # type: ignore[no-untyped-def]
        body = infer_body("x", x)
        body["inputs"].append({"name": "steps", "datatype": "INT64", "shape": [1], "data": [steps]})
        return client.post("/v2/models/acme/spinner/versions/1/infer", json=body, headers=headers)

    assert call(0).status_code == 200  # loads it
    hung = call(10**15, **{"inference-timeout": "1"})
    assert hung.status_code == 504, hung.text
    assert hung.json()["code"] == "execution_timeout"
    answered = call(2)
    assert answered.status_code == 200, answered.text
    assert answered.json()["outputs"][0]["data"] == [2.0, 2.0, 2.0, 2.0]
    labels = {"model": "acme/spinner", "version": "1"}
    assert metric(client, "modelport_model_worker_crashes_total", reason="timeout", **labels) == 1
    assert metric(client, "modelport_model_worker_starts_total", **labels) == 2
    assert services.host is not None


def test_a_manifest_with_an_unknown_execution_mode_is_refused(make_v2: V2Factory) -> None:
    client, _, publisher = make_v2()
    with pytest.raises(AssertionError) as raised:
        publisher.adder("acme/odd", runtime={"execution": "fork"})
    assert "execution must be one of thread, process" in str(raised.value)
    assert client.get("/v2/models/acme/odd/versions/1").status_code == 404


def test_tritonclient_sees_the_timeout_as_an_error(live_v2) -> None:
    url, publisher = live_v2
    publisher.publish(
        "acme/spinner",
        "1",
        looping_add_one(),
        inputs=[
            {"name": "x", "datatype": "FP32", "shape": [-1, 4]},
            {"name": "steps", "datatype": "INT64", "shape": [-1]},
        ],
        outputs=[{"name": "y", "datatype": "FP32", "shape": [-1, 4]}],
        **PROCESS,
    )
    # Loaded (its worker started) before the call: the second of the call's timeout is
    # spent executing, however long a loaded machine takes to start a process.
    loaded = httpx.post(
        f"{url}/v2/repository/models/acme/spinner/load", headers=dict(AUTH), timeout=60
    )
    assert loaded.status_code == 200, loaded.text
    client = triton.InferenceServerClient(url=url.removeprefix("http://"))
    try:
        x = triton.InferInput("x", [1, 4], "FP32")
        x.set_data_from_numpy(np.ones((1, 4), np.float32))
        steps = triton.InferInput("steps", [1], "INT64")
        steps.set_data_from_numpy(np.array([10**15], np.int64))
        with pytest.raises(InferenceServerException) as raised:
            client.infer("acme/spinner", [x, steps], headers=dict(AUTH), timeout=1_000_000)
        assert "stopped" in str(raised.value)
        steps.set_data_from_numpy(np.array([1], np.int64))
        result = client.infer("acme/spinner", [x, steps], headers=dict(AUTH))
        np.testing.assert_array_equal(result.as_numpy("y"), np.full((1, 4), 2, np.float32))
    finally:
        client.close()


def _executor_of(services: Any, ref: str) -> Any:
    assert services.host is not None
    (hosted,) = [h for key, h in services.host._hosted.items() if key.model == ref]
    return hosted.executor


def test_the_operator_setting_runs_a_thread_manifest_in_a_model_host_without_credentials(
    make_v2: V2Factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    from modelport.runtime.process.executor import ProcessExecutor

    database_url = "postgresql+psycopg://ops:db-password-leak@db/modelport"
    # Secrets in the server's environment (the settings given here take precedence).
    monkeypatch.setenv("MODELPORT_DATABASE_URL", database_url)
    monkeypatch.setenv("MODELPORT_BLOB_SECRET_ACCESS_KEY", "blob-secret-do-not-leak")
    client, services, publisher = make_v2(runtime_execution="process")
    publisher.adder("acme/adder", runtime={"execution": "thread"})
    answer = client.post(
        "/v2/models/acme/adder/versions/1/infer", json=infer_body("x", np.ones((1, 4), np.float32))
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["outputs"][0]["data"] == [2.0, 2.0, 2.0, 2.0]
    executor = _executor_of(services, "acme/adder")
    assert isinstance(executor, ProcessExecutor)  # the manifest said thread
    (pid,) = executor.pids
    assert pid != os.getpid()
    with open(f"/proc/{pid}/environ", "rb") as handle:
        environ = handle.read().decode()
    # The server's own secrets (the suite seals with MODELPORT_SECRET_KEY) stay behind.
    assert "MODELPORT_" not in environ
    assert ADMIN_KEY not in environ
    assert "blob-secret-do-not-leak" not in environ and database_url not in environ


def test_on_default_settings_a_v2_call_runs_in_a_model_host(
    make_v2: V2Factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The production default (the suite pins threads): a version whose manifest says
    nothing, and one whose manifest asks for threads, both execute in model hosts."""
    from modelport.runtime.process.executor import ProcessExecutor

    monkeypatch.delenv("MODELPORT_RUNTIME_EXECUTION", raising=False)
    client, services, publisher = make_v2()
    assert services.settings.runtime.execution == "process"
    publisher.adder("acme/adder")
    publisher.adder("acme/threaded", runtime={"execution": "thread"})
    for ref in ("acme/adder", "acme/threaded"):
        answer = client.post(
            f"/v2/models/{ref}/versions/1/infer", json=infer_body("x", np.ones((1, 4), np.float32))
        )
        assert answer.status_code == 200, answer.text
        assert answer.json()["outputs"][0]["data"] == [2.0, 2.0, 2.0, 2.0]
        executor = _executor_of(services, ref)
        assert isinstance(executor, ProcessExecutor)
        assert os.getpid() not in executor.pids


def test_on_default_settings_without_a_sandbox_a_version_fails_closed(
    make_v2: V2Factory, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Where the sandbox's mode cannot be had, nothing falls back to the server's threads:
    the load fails with the sandbox's code."""
    monkeypatch.delenv("MODELPORT_RUNTIME_EXECUTION", raising=False)
    client, services, publisher = make_v2(
        sandbox="bubblewrap", sandbox_bwrap=str(tmp_path / "no-bwrap")
    )
    publisher.adder("acme/adder")
    answer = client.post(
        "/v2/models/acme/adder/versions/1/infer", json=infer_body("x", np.ones((1, 4), np.float32))
    )
    assert answer.status_code == 503, answer.text
    assert answer.json()["code"] == "sandbox_unavailable"
    assert _executor_of(services, "acme/adder") is None


def test_with_the_manifest_setting_a_thread_manifest_executes_in_the_server(
    make_v2: V2Factory,
) -> None:
    from modelport.runtime.executor import ThreadExecutor

    client, services, publisher = make_v2(runtime_execution="manifest")
    publisher.adder("acme/adder")
    answer = client.post(
        "/v2/models/acme/adder/versions/1/infer", json=infer_body("x", np.ones((1, 4), np.float32))
    )
    assert answer.status_code == 200, answer.text
    assert isinstance(_executor_of(services, "acme/adder"), ThreadExecutor)


def test_strings_in_and_out_of_a_process_version_over_v2(make_v2: V2Factory) -> None:
    client, _, publisher = make_v2()
    publisher.publish(
        "acme/echo",
        "1",
        echo_text(),
        inputs=[
            {"name": "text", "datatype": "BYTES", "shape": [-1]},
            {"name": "x", "datatype": "FP32", "shape": [-1, 4]},
        ],
        outputs=[
            {"name": "echo", "datatype": "BYTES", "shape": [-1]},
            {"name": "y", "datatype": "FP32", "shape": [-1, 4]},
        ],
        **PROCESS,
    )
    body = infer_body("x", np.zeros((2, 4), np.float32))
    body["inputs"].append(
        {"name": "text", "datatype": "BYTES", "shape": [2], "data": ["héllo", ""]}
    )
    answered = client.post("/v2/models/acme/echo/versions/1/infer", json=body)
    assert answered.status_code == 200, answered.text
    outputs = {o["name"]: o for o in answered.json()["outputs"]}
    assert outputs["echo"]["datatype"] == "BYTES" and outputs["echo"]["data"] == ["héllo", ""]
    assert outputs["y"]["data"] == [1.0] * 8
