"""A package whose own code tries to pass its own gate: validation runs the publisher's
processing code, and approval happens inside the publisher's tenant, so the verdict is
the one check the platform enforces. The code may write a passing result where the
worker used to leave its own, end the worker early, or write on the worker's answer
pipe: each is contained and reported as a failed validation with the reason."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.testclient import TestClient

from modelport.app import Services
from tests.registry.helpers import Registry
from tests.serving.processing_package import (
    EXAMPLE,
    LABELS_CODE,
    OUTPUTS,
    TEXT,
    package_files,
    processing_section,
)

pytestmark = pytest.mark.slow  # every validation runs a sandboxed process

REF = "mallory/sentiment"
WRONG = {
    "inputs": EXAMPLE["inputs"],
    "outputs": [{"name": "label", "datatype": "BYTES", "shape": [3], "data": ["positive"] * 3}],
}
"""An example whose expected output the model does not give."""

FORGED_RESULT = {
    "status": "passed",
    "detail": "1 example(s) passed",
    "load_ms": 1.0,
    "examples": [{"index": 0, "passed": True, "problems": [], "ms": 1.0}],
}
FORGER = f"""
import json
import os

# At import, before any example runs: a passing result where the worker writes its
# own, then an exit before the worker can say otherwise.
for where in ("result.json", "job/result.json", "../result.json"):
    try:
        with open(where, "w") as f:
            json.dump({FORGED_RESULT!r}, f)
    except OSError:
        pass
os._exit(0)
"""
EARLY_EXIT = """
import os

os._exit(0)
"""
PIPE_WRITER = """
import os
import stat

# Whatever pipe the worker answers on, junk goes on it first.
for fd in range(3, 256):
    try:
        if stat.S_ISFIFO(os.fstat(fd).st_mode):
            os.write(fd, b"not a frame of the answer")
    except OSError:
        pass
"""


@pytest.fixture
def model(client: TestClient, services: Services) -> Registry:
    registry = Registry(client, services)
    registry.create_model(REF)
    return registry


def _publish(model: Registry, version: str, labels: str, example: dict[str, Any]) -> None:
    files = []
    for path, data in package_files(labels=labels).items():
        files.append({"path": path, "digest": model.upload(data), "size": len(data)})
    manifest = {
        "format": "onnx",
        "files": files,
        "inputs": TEXT,
        "outputs": OUTPUTS,
        "license": "MIT",
        "examples": [example],
        "processing": processing_section(),
    }
    model.publish(REF, version, manifest)


def _refused(model: Registry, version: str) -> dict[str, Any]:
    """Validate ``version``; its report, once checked that the version was not validated."""
    response = model.transition(REF, version, "validated")
    assert response.status_code == 422, response.text
    assert response.json()["code"] == "validation_failed"
    state = model.client.get(f"/api/models/{REF}/versions/{version}").json()["state"]
    assert state == "candidate"
    report: dict[str, Any] = response.json()["report"]
    assert report["passed"] is False
    return report


def test_code_that_forges_a_passing_result_fails_validation(model: Registry) -> None:
    _publish(model, "honest", LABELS_CODE, WRONG)
    assert _refused(model, "honest")["cause"] == "examples_failed"

    _publish(model, "forged", LABELS_CODE + FORGER, WRONG)
    report = _refused(model, "forged")
    assert report["cause"] == "validation_failed"
    assert "wrote files: result.json" in report["detail"]
    assert report["examples"] == []


def test_code_that_ends_the_worker_early_fails_validation(model: Registry) -> None:
    _publish(model, "1", LABELS_CODE + EARLY_EXIT, EXAMPLE)
    report = _refused(model, "1")
    assert report["cause"] == "validation_failed"
    assert "ended before the model was loaded" in report["detail"]


def test_code_that_writes_on_the_answer_pipe_fails_validation(model: Registry) -> None:
    _publish(model, "1", LABELS_CODE + PIPE_WRITER, EXAMPLE)
    report = _refused(model, "1")
    assert report["cause"] == "validation_failed"
    assert "malformed answer" in report["detail"]


def test_code_that_prints_does_not_disturb_the_answer(model: Registry) -> None:
    """A print of the publisher's code goes to the worker's log, not into its answer."""
    printer = LABELS_CODE + "\nprint('hello from the package')\n"
    _publish(model, "1", printer, EXAMPLE)
    response = model.transition(REF, "1", "validated")
    assert response.status_code == 201, response.text
