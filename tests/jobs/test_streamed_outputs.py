"""Big stage outputs: encoded and written to the blob store a piece at a time, on a
worker thread, while the job's lease keeps being renewed; read back (the next stage, the
download) in pieces too."""

from __future__ import annotations

import threading
import tracemalloc
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import orjson
import pytest
from onnx import TensorProto, helper, numpy_helper

from modelport.blobs.interface import StagingWriter
from modelport.blobs.local import LocalBlobStore
from modelport.blobs.service import BlobService
from modelport.clock import ManualClock
from modelport.jobs import tensors
from modelport.jobs.stages import StageContext
from modelport.jobs.types import JobState
from tests.jobs.conftest import Jobs
from tests.metering.conftest import approve
from tests.polling import eventually

ROWS, WIDTH = 1500, 1000
"""1.5 million FP32 numbers: about 27 MB of JSON, 6 MB as an array."""
LEASE = 30.0


def widen(width: int) -> onnx.ModelProto:
    """x [-1, 1] FP32 -> y = x * w, w [1, width]: one exact product per number, so
    numpy computes the same values."""
    graph = helper.make_graph(
        [helper.make_node("Mul", ["x", "w"], ["y"])],
        "widen",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, width])],
        initializer=[numpy_helper.from_array(_weights(width), "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _weights(width: int) -> np.ndarray:
    return np.random.default_rng(7).random((1, width), dtype=np.float32)


def _rows() -> np.ndarray:
    return (np.arange(ROWS, dtype=np.float32) / 7).reshape(ROWS, 1)


def _publish_widen(jobs: Jobs) -> None:
    public = {"owner": "acme", "name": "widen", "license": "MIT", "visibility": "public"}
    assert jobs.platform.client.post("/api/models", json=public).status_code == 201
    jobs.platform.publisher.models.add("acme/widen")
    jobs.platform.publisher.publish(
        "acme/widen",
        "1",
        widen(WIDTH),
        inputs=[{"name": "x", "datatype": "FP32", "shape": [-1, 1]}],
        outputs=[{"name": "y", "datatype": "FP32", "shape": [-1, WIDTH]}],
    )
    approve(jobs.services, "acme", "widen", "1")


def _submit(jobs: Jobs, **body: Any) -> str:
    x = _rows()
    response = jobs.submit(
        target={"model": "acme/widen"},
        inputs=[{"name": "x", "datatype": "FP32", "shape": [ROWS, 1], "data": x.ravel().tolist()}],
        **body,
    )
    assert response.status_code == 202, response.text
    return str(response.json()["id"])


def _expected(document: dict[str, Any], name: str) -> bytes:
    """The output as ``tensors.dumps`` writes it from the whole, encoded document."""
    wide = _rows() * _weights(WIDTH)
    return tensors.dumps(
        {
            **{k: v for k, v in document.items() if k != "outputs"},
            "outputs": [tensors.encode_tensor(name, wide)],
        }
    )


def _download(jobs: Jobs, job_id: str, digest: str) -> bytes:
    response = jobs.platform.client.get(
        f"/api/jobs/{job_id}/outputs/{digest}", headers=jobs.headers
    )
    assert response.status_code == 200, response.text
    return response.content


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)  # one is enough
def test_a_big_output_is_written_in_bounded_memory_and_downloads_byte_identical(
    jobs: Jobs,
) -> None:
    _publish_widen(jobs)
    job_id = _submit(jobs, rename={"y": "wide"})
    runner = jobs.runner()
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        jobs.drain(runner)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    job = jobs.services.jobs.get(None, job_id)
    assert job.state is JobState.SUCCEEDED, job.error
    size = jobs.services.blobs.stat(job.output_digest).size
    infer_size = jobs.services.blobs.stat(job.stages[1].output_digest).size
    assert size > 25_000_000 and infer_size > 25_000_000
    # The whole job (the call, the infer stage's encoding, the postprocess stage's
    # rewrite) held far less than its output: the 6 MB array and a few pieces. Held
    # whole, as Python numbers and as JSON, it took several times the output's size.
    assert peak - before < size // 3, (peak - before, size)

    shown = jobs.get(job_id).json()
    assert shown["output"]["inline"] is False and shown["output"]["size"] == size
    downloaded = _download(jobs, job_id, job.output_digest or "")
    document = orjson.loads(downloaded)
    assert [o["name"] for o in document["outputs"]] == ["wide"]
    assert downloaded == _expected(document, "wide")
    assert job.stages[1].output_digest != job.output_digest  # renamed: another document
    infer = _download(jobs, job_id, job.stages[1].output_digest or "")
    assert infer == _expected(orjson.loads(infer), "y")


class GatedStore(LocalBlobStore):
    """The platform's own folder store, whose writes stop, once a writer has taken
    1 MiB, until ``gate`` opens (``writing`` says they stopped)."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.gate = threading.Event()
        self.writing = threading.Event()

    def open_staging(self, upload_id: str, offset: int) -> StagingWriter:
        return _GatedWriter(super().open_staging(upload_id, offset), self)


class _GatedWriter(StagingWriter):
    def __init__(self, inner: StagingWriter, store: GatedStore) -> None:
        super().__init__(inner.offset)
        self.inner = inner
        self.store = store

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.inner.write(data)
        self.size = self.inner.size
        if self.size > 1 << 20 and not self.store.gate.is_set():
            self.store.writing.set()
            assert self.store.gate.wait(60)

    def publish(self) -> None:
        self.inner.publish()

    def abort(self) -> None:
        self.inner.abort()


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)  # one is enough
def test_the_lease_is_renewed_while_a_big_output_is_written(jobs: Jobs) -> None:
    _publish_widen(jobs)
    services = jobs.services
    store = GatedStore(services.blob_store.root)
    clock = ManualClock()
    runner = jobs.runner(clock=clock, lease=LEASE)
    runner.services = replace(
        runner.services,
        blobs=BlobService(
            services.database, store, verify_below_bytes=services.blobs.verify_below_bytes
        ),
    )
    job_id = _submit(jobs, pipeline=[{"name": "infer", "implementation": "infer"}])

    def expires() -> datetime:
        at = services.jobs.get(None, job_id).lease_expires_at
        assert at is not None
        return at

    runner.start()
    try:
        assert store.writing.wait(60)  # the output is half written, and stays so
        for _ in range(3):
            assert eventually(lambda: clock.parked >= 1)  # the heartbeat's next sleep
            last = expires()
            clock.advance(LEASE / 3)
            assert eventually(lambda last=last: expires() > last)  # renewed meanwhile
        store.gate.set()
        assert eventually(lambda: services.jobs.get(None, job_id).finished)
    finally:
        store.gate.set()
        runner.stop()
    job = services.jobs.get(None, job_id)
    assert job.state is JobState.SUCCEEDED, job.error
    assert job.lease_generation == 1 and job.stages[0].attempts == 1  # never taken over
    downloaded = _download(jobs, job_id, job.output_digest or "")
    assert downloaded == _expected(orjson.loads(downloaded), "y")


@dataclass
class Broken:
    """A custom stage whose output is JSON cut short."""

    async def run(self, context: StageContext) -> bytes:
        return b'{"model": "m", "outputs": [{"name": "y", "data": [1, 2'


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)  # no database matter
def test_postprocess_refuses_a_previous_output_that_is_no_json(jobs: Jobs) -> None:
    jobs.register("broken", Broken())
    pipeline = [
        {"name": "broken", "implementation": "broken"},
        {"name": "postprocess", "implementation": "postprocess", "retries": 0},
    ]
    job_id = jobs.submit(pipeline=pipeline).json()["id"]
    jobs.drain()
    failed = jobs.get(job_id).json()
    assert failed["state"] == "failed" and failed["error"]["code"] == "invalid_job_input"
    assert [s["state"] for s in failed["stages"]] == ["done", "failed"]
    assert failed.get("output") is None


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)  # no database matter
def test_an_attempt_timed_out_mid_write_leaves_nothing_half_written(jobs: Jobs) -> None:
    _publish_widen(jobs)
    services = jobs.services
    store = GatedStore(services.blob_store.root)
    runner = jobs.runner()
    runner.services = replace(
        runner.services,
        blobs=BlobService(
            services.database, store, verify_below_bytes=services.blobs.verify_below_bytes
        ),
    )
    infer = {"name": "infer", "implementation": "infer", "retries": 0, "timeout_seconds": 1}
    job_id = _submit(jobs, pipeline=[infer])
    staging = services.blob_store.root / "_uploads"
    runner.start()
    try:
        assert store.writing.wait(60)
        assert eventually(lambda: services.jobs.get(None, job_id).finished)
        store.gate.set()  # the writing thread wakes, and stops at its next piece
        assert eventually(lambda: not any(staging.iterdir()))  # what it staged is dropped
    finally:
        store.gate.set()
        runner.stop()
    job = services.jobs.get(None, job_id)
    assert job.state is JobState.FAILED and job.error_code == "stage_timeout"
    assert job.output_digest is None and job.stages[0].output_digest is None
