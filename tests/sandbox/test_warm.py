"""Warm workers in the sandbox: reused call after call, at most the pool's size at once,
replaced after a failure or a timeout."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from modelport.sandbox import Limits, Sandbox, SandboxMode
from modelport.sandbox.warm import ProcessingFailed, ProcessingTimeout, WarmPool, WarmWorker
from tests.polling import eventually

pytestmark = pytest.mark.slow  # each worker is a process

CODE = """
import os
import time
from pathlib import Path

import numpy as np

PROCESS = os.urandom(8).hex()  # pids repeat: each worker has its own PID namespace


def double(inputs):
    return {"y": np.asarray(inputs["x"]) * 2, "process": [PROCESS]}


def gate(inputs):
    Path("started").write_text("1")
    while not Path("release").exists():
        time.sleep(0.01)
    os.remove("started")
    return {"y": np.asarray(inputs["x"])}
"""


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "files").mkdir()
    (tmp_path / "files" / "code.py").write_text(CODE)
    (tmp_path / "processing.json").write_text(
        '{"preprocess": "code:double", "postprocess": "code:gate"}'
    )
    return tmp_path


@pytest.fixture
def pool(folder: Path, bubblewrap: None) -> Iterator[WarmPool]:
    sandbox = Sandbox(SandboxMode.AUTO)

    def start(deadline: float) -> WarmWorker:
        with (folder / "worker.log").open("ab") as log:
            started = sandbox.start(
                ["modelport.sandbox.processing_worker", "."],
                scratch=folder,
                readonly=[folder / "files"],
                limits=Limits(wall_seconds=0, cpu_seconds=0, memory_bytes=1 << 30),
                stderr=log,
            )
        worker = WarmWorker(started, stderr=folder / "worker.log")
        worker.wait_ready(deadline)
        return worker

    made = WarmPool(start, size=1, start_timeout=30)
    yield made
    made.close()


def call(pool: WarmPool, stage: str, deadline: float = 60.0) -> dict[str, np.ndarray]:
    _, tensors = pool.call({"stage": stage}, {"x": np.arange(3)}, time.monotonic() + deadline)
    return tensors


def test_a_worker_serves_call_after_call(pool: WarmPool) -> None:
    first = call(pool, "preprocess")
    second = call(pool, "preprocess")
    assert first["y"].tolist() == [0, 2, 4]
    assert first["process"].tolist() == second["process"].tolist()
    assert pool.started == 1


def test_calls_past_the_pools_size_wait_within_their_deadline(pool: WarmPool, folder: Path) -> None:
    results: list[object] = []
    busy = threading.Thread(target=lambda: results.append(call(pool, "postprocess")))
    busy.start()
    assert eventually(lambda: (folder / "started").exists(), seconds=30)
    with pytest.raises(ProcessingTimeout, match="stayed busy"):
        call(pool, "preprocess", deadline=0.2)
    (folder / "release").write_text("1")
    busy.join(timeout=30)
    assert len(results) == 1
    assert call(pool, "preprocess")["y"].tolist() == [0, 2, 4]
    assert pool.started == 1  # the waiting call took nothing from the busy worker


def test_a_worker_past_its_deadline_is_killed_and_replaced(pool: WarmPool, folder: Path) -> None:
    pid = call(pool, "preprocess")["process"].tolist()
    with pytest.raises(ProcessingTimeout, match="did not answer in time"):
        call(pool, "postprocess", deadline=0.5)  # gate waits for a release that never comes
    again = call(pool, "preprocess")
    assert again["process"].tolist() != pid
    assert pool.started == 2


def test_a_stage_the_worker_does_not_have_fails_the_call(folder: Path, pool: WarmPool) -> None:
    with pytest.raises(ProcessingFailed, match="no nothing entry point"):
        call(pool, "nothing")
    assert call(pool, "preprocess")["y"].tolist() == [0, 2, 4]
    assert pool.started == 2  # a failed worker is never used again


def test_an_answer_past_the_workers_limit_is_refused(folder: Path, bubblewrap: None) -> None:
    sandbox = Sandbox(SandboxMode.AUTO)
    with (folder / "worker.log").open("ab") as log:
        started = sandbox.start(
            ["modelport.sandbox.processing_worker", "."],
            scratch=folder,
            readonly=[folder / "files"],
            limits=Limits(wall_seconds=0, cpu_seconds=0, memory_bytes=1 << 30),
            stderr=log,
        )
    worker = WarmWorker(started, max_answer_bytes=1000)
    try:
        worker.wait_ready(time.monotonic() + 30)
        with pytest.raises(ProcessingFailed, match="answered nonsense: an answer of over 1000"):
            worker.call({"stage": "preprocess"}, {"x": np.arange(500)}, time.monotonic() + 30)
        assert not worker.alive
    finally:
        worker.close()
