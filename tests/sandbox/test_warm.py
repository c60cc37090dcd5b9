"""Warm workers in the sandbox: reused call after call, at most the pool's size at once,
replaced after a failure or a timeout; stopped when idle too long (the pool's clock),
killed when they spin while serving no call."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from modelport.app import build_cgroups
from modelport.clock import ManualClock
from modelport.sandbox import Enforcement, Limits, Sandbox, SandboxMode
from modelport.sandbox.cgroups import Cgroups
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


def spin_after(inputs):
    # Returns, and leaves a thread burning CPU behind it.
    import threading

    threading.Thread(target=_spin, daemon=True).start()
    return double(inputs)


def _spin():
    while True:
        pass


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


def make_pool(folder: Path, cgroups: Cgroups | None = None, **options: Any) -> WarmPool:
    sandbox = Sandbox(SandboxMode.AUTO, cgroups=cgroups)

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

    return WarmPool(start, size=1, start_timeout=30, **options)


@pytest.fixture
def pool(folder: Path, bubblewrap: None) -> Iterator[WarmPool]:
    made = make_pool(folder)
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


def test_an_idle_worker_is_stopped_after_the_idle_time(folder: Path, bubblewrap: None) -> None:
    clock = ManualClock()
    reaped: list[tuple[str, float]] = []
    pool = make_pool(
        folder,
        idle_seconds=60,
        idle_cpu_seconds=0.5,
        clock=clock,
        on_reap=lambda reason, cpu: reaped.append((reason, cpu)),
    )
    try:
        first = call(pool, "preprocess")["process"].tolist()
        clock.advance(59)
        assert pool.reap() == []  # not yet idle long enough, and quiet
        clock.advance(1)
        assert pool.reap() == ["idle"]
        assert pool.idle == 0
        assert [reason for reason, _ in reaped] == ["idle"]
        again = call(pool, "preprocess")  # a fresh worker
        assert again["y"].tolist() == [0, 2, 4]
        assert again["process"].tolist() != first
        assert pool.started == 2
    finally:
        pool.close()


SPIN_AT_IMPORT = """
import threading

import numpy as np


def _spin():
    while True:
        pass


threading.Thread(target=_spin, daemon=True).start()


def double(inputs):
    return {"y": np.asarray(inputs["x"]) * 2, "process": ["spinner"]}
"""


@pytest.mark.parametrize(
    ("when", "measured_by"),
    [("after_its_call", "proc"), ("at_import", "proc"), ("after_its_call", "cgroup")],
)
def test_a_worker_that_spins_between_calls_is_killed_and_replaced(
    folder: Path, bubblewrap: None, when: str, measured_by: str
) -> None:
    """Its CPU time is read from its cgroup where it has one, else from ``/proc``."""
    cgroups = None
    if measured_by == "cgroup":
        cgroups = build_cgroups("auto", None)
        if cgroups.enforcement is Enforcement.RLIMITS:
            pytest.skip(f"this host gives the server no cgroup it can write: {cgroups.reason}")
    if when == "at_import":
        (folder / "files" / "spinner.py").write_text(SPIN_AT_IMPORT)
        entries = '{"preprocess": "spinner:double", "postprocess": "code:double"}'
    else:
        entries = '{"preprocess": "code:spin_after", "postprocess": "code:double"}'
    (folder / "processing.json").write_text(entries)
    reaped: list[tuple[str, float]] = []
    pool = make_pool(
        folder,
        cgroups,
        idle_seconds=3600,
        idle_cpu_seconds=0.2,
        clock=ManualClock(),
        on_reap=lambda reason, cpu: reaped.append((reason, cpu)),
    )
    try:
        assert call(pool, "preprocess")["y"].tolist() == [0, 2, 4]
        assert eventually(lambda: pool.reap() == ["idle_cpu"], seconds=60)
        [(reason, cpu)] = reaped
        assert reason == "idle_cpu" and cpu > 0.2
        # The call that follows gets a fresh worker (whose code spins again).
        assert call(pool, "postprocess")["y"].tolist() == [0, 2, 4]
        assert pool.started == 2
    finally:
        pool.close()
