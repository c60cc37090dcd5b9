"""Versions executed in worker processes: the same answers as threads, a hang killed at
its deadline, crashes contained, restarted and counted, quarantine and its end."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import pytest

from modelport.clock import ManualClock
from modelport.errors import DeadlineExceeded, Internal, Unavailable
from modelport.runtime.admission import MemoryBudget
from modelport.runtime.cache import ModelCache
from modelport.runtime.executor import Executor
from modelport.runtime.formats import FormatRegistry
from modelport.runtime.host import ModelHost
from modelport.runtime.process.crashes import CrashLedger
from modelport.runtime.process.executor import ProcessExecutor, ProcessExecutors
from modelport.runtime.types import VersionKey
from modelport.testing.onnx_models import add_one, echo_text, looping_add_one
from tests.runtime.conftest import DictBlobSource, mlp_manifest, onnx_manifest
from tests.runtime.process.conftest import MISBEHAVING, ProcessHostFactory
from tests.runtime.process.plugins import EXIT, LIES, RAISE, SEGFAULT

pytestmark = pytest.mark.slow

PROCESS = {"runtime": {"execution": "process"}}
ADD_ONE_SPECS: dict[str, Any] = {
    "inputs": [{"name": "x", "datatype": "FP32", "shape": [-1, 4]}],
    "outputs": [{"name": "y", "datatype": "FP32", "shape": [-1, 4]}],
}


def load(
    host: ModelHost, source: DictBlobSource, manifest: Any, digest: str, name: str
) -> VersionKey:
    key = VersionKey(f"acme/{name}", "1", digest)
    host.load(key, manifest, source)
    return key


def process_executor(host: ModelHost, key: VersionKey) -> ProcessExecutor:
    executor: Executor | None = host._hosted[key].executor
    assert isinstance(executor, ProcessExecutor)
    return executor


def infer(host: ModelHost, key: VersionKey, timeout: float = 30.0, **inputs: np.ndarray) -> Any:
    async def go() -> Any:
        result = await host.infer(key, inputs, deadline=time.monotonic() + timeout)
        return result.outputs

    return asyncio.run(go())


def misbehaving(source: DictBlobSource) -> tuple[Any, str]:
    manifest, digest = onnx_manifest(source, add_one(), **ADD_ONE_SPECS, **PROCESS)
    raw = manifest.model_dump(mode="json")
    raw["format"] = "misbehaving"
    return type(manifest).model_validate(raw), digest


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_process_and_thread_execution_answer_the_same(
    make_process_host: ProcessHostFactory, source: DictBlobSource
) -> None:
    host = make_process_host()
    threaded = load(host, source, *mlp_manifest(source), "threaded")
    separate = load(host, source, *mlp_manifest(source, **PROCESS), "separate")
    assert host._hosted[threaded].executor is not None
    assert not host._hosted[threaded].executor.kills_overdue
    assert process_executor(host, separate).pids[0] != os.getpid()
    rng = np.random.default_rng(7)
    # Small, and large enough that the host grows both shared-memory segments.
    for rows in (1, 3, 20_000):
        features = rng.standard_normal((rows, 8)).astype(np.float32)
        expected = infer(host, threaded, features=features)["probabilities"]
        got = infer(host, separate, features=features)["probabilities"]
        assert got.shape == (rows, 3)
        np.testing.assert_array_equal(got, expected)


def test_concurrent_requests_are_batched_and_split_back(
    make_process_host: ProcessHostFactory, source: DictBlobSource
) -> None:
    host = make_process_host()
    key = load(host, source, *onnx_manifest(source, add_one(), **ADD_ONE_SPECS, **PROCESS), "add")

    async def many() -> list[Any]:
        calls = [
            host.infer(key, {"x": np.full((2, 4), i, np.float32)}, deadline=time.monotonic() + 30)
            for i in range(40)
        ]
        return list(await asyncio.gather(*calls))

    for i, result in enumerate(asyncio.run(many())):
        np.testing.assert_array_equal(result.outputs["y"], np.full((2, 4), i + 1, np.float32))


def test_calls_kept_in_flight_merge_into_batches_as_on_threads(
    make_process_host: ProcessHostFactory, source: DictBlobSource
) -> None:
    """16 callers, each sending its next call when it has its answer: a model host
    executes them in batches of 16, as a thread version does."""
    batches: dict[str, list[int]] = {}

    class Observer:
        def version(self, model: str, version: str) -> Any:
            from modelport.runtime.observer import NullObserver

            inner = NullObserver().version(model, version)
            sizes = batches.setdefault(model, [])
            inner.batch_executed = lambda size, seconds: sizes.append(size)  # type: ignore[method-assign]
            return inner

    host = make_process_host(observer=Observer())
    batchable = {**ADD_ONE_SPECS, "resources": {"max_batch_size": 64}}
    keys = [
        load(host, source, *onnx_manifest(source, add_one(), **batchable, **extra), name)
        for name, extra in (("threaded", {}), ("separate", PROCESS))
    ]
    assert process_executor(host, keys[1]).pids

    async def callers(key: VersionKey) -> None:
        async def caller(i: int) -> None:
            for _ in range(4):
                x = np.full((1, 4), i, np.float32)
                result = await host.infer(key, {"x": x}, deadline=time.monotonic() + 60)
                np.testing.assert_array_equal(result.outputs["y"], x + 1)

        await asyncio.gather(*(caller(i) for i in range(16)))

    for key in keys:
        asyncio.run(callers(key))
    assert batches == {"acme/threaded": [16] * 4, "acme/separate": [16] * 4}


def test_a_hung_execution_is_killed_at_its_deadline_and_the_next_call_succeeds(
    make_process_host: ProcessHostFactory, source: DictBlobSource
) -> None:
    host = make_process_host()
    manifest, digest = onnx_manifest(
        source,
        looping_add_one(),
        inputs=[
            {"name": "x", "datatype": "FP32", "shape": [-1, 4]},
            {"name": "steps", "datatype": "INT64", "shape": [-1]},
        ],
        outputs=[{"name": "y", "datatype": "FP32", "shape": [-1, 4]}],
        **PROCESS,
    )
    key = load(host, source, manifest, digest, "loop")
    executor = process_executor(host, key)
    (hung,) = executor.pids
    x = np.ones((1, 4), np.float32)
    # 10**15 iterations: years of real computation inside onnxruntime.
    with pytest.raises(DeadlineExceeded) as raised:
        infer(host, key, timeout=1.0, x=x, steps=np.array([10**15], np.int64))
    assert raised.value.code == "execution_timeout"
    deadline = time.monotonic() + 30
    while not gone(hung) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert gone(hung), "the hung worker was not killed"
    outputs = infer(host, key, x=x, steps=np.array([3], np.int64))
    np.testing.assert_array_equal(outputs["y"], x + 1)
    (fresh,) = executor.pids
    assert fresh != hung
    assert host.status(key) is not None and host.status(key).state == "ready"  # type: ignore[union-attr]


@pytest.mark.parametrize(("trigger", "how"), [(EXIT, "exit status 3"), (SEGFAULT, "SIGSEGV")])
def test_a_crash_is_a_500_and_the_worker_is_restarted(
    make_process_host: ProcessHostFactory, source: DictBlobSource, trigger: float, how: str
) -> None:
    segments = set(os.listdir("/dev/shm"))
    host = make_process_host()
    key = load(host, source, *misbehaving(source), "crashy")
    executor = process_executor(host, key)
    (first,) = executor.pids
    with pytest.raises(Internal) as raised:
        infer(host, key, x=np.full((1, 4), trigger, np.float32))
    assert raised.value.code == "execution_crashed"
    assert how in raised.value.message
    assert gone(first)
    outputs = infer(host, key, x=np.zeros((1, 4), np.float32))
    np.testing.assert_array_equal(outputs["y"], np.ones((1, 4), np.float32))
    assert executor.pids and executor.pids[0] != first
    host.close()
    # The host owns every segment: none outlives the workers, crashed or stopped.
    assert set(os.listdir("/dev/shm")) <= segments


def test_an_exception_in_the_model_is_execution_failed_and_the_worker_goes_on(
    make_process_host: ProcessHostFactory, source: DictBlobSource
) -> None:
    host = make_process_host()
    key = load(host, source, *misbehaving(source), "raising")
    executor = process_executor(host, key)
    pids = executor.pids
    with pytest.raises(Internal) as raised:
        infer(host, key, x=np.full((1, 4), RAISE, np.float32))
    assert raised.value.code == "execution_failed"
    assert "the model refuses this row" in raised.value.message
    np.testing.assert_array_equal(infer(host, key, x=np.ones((1, 4), np.float32))["y"], 2.0)
    assert executor.pids == pids


def test_repeated_crashes_quarantine_the_version_until_the_window_passes(
    make_process_host: ProcessHostFactory, source: DictBlobSource, clock: ManualClock
) -> None:
    host = make_process_host(crash_limit=2, window=30.0)
    key = load(host, source, *misbehaving(source), "fragile")
    executor = process_executor(host, key)
    crash = np.full((1, 4), EXIT, np.float32)
    for _ in range(2):
        with pytest.raises(Internal):
            infer(host, key, x=crash)
    with pytest.raises(Unavailable) as raised:
        infer(host, key, x=np.zeros((1, 4), np.float32))
    assert raised.value.code == "version_quarantined"
    assert executor.pids == []  # no worker restarted into the quarantine
    clock.advance(29.0)
    with pytest.raises(Unavailable):
        infer(host, key, x=np.zeros((1, 4), np.float32))
    clock.advance(2.0)
    np.testing.assert_array_equal(infer(host, key, x=np.zeros((1, 4), np.float32))["y"], 1.0)
    assert len(executor.pids) == 1


def test_a_host_without_worker_processes_fails_the_load_with_a_clear_code(
    make_process_host: ProcessHostFactory, source: DictBlobSource
) -> None:
    host = make_process_host(process_executors=None)
    manifest, digest = onnx_manifest(source, add_one(), **ADD_ONE_SPECS, **PROCESS)
    with pytest.raises(Unavailable) as raised:
        load(host, source, manifest, digest, "nowhere")
    assert raised.value.code == "execution_mode_unavailable"


def test_a_model_that_fails_to_load_in_the_worker_fails_the_version(
    make_process_host: ProcessHostFactory, source: DictBlobSource, tmp_path: Path
) -> None:
    host = make_process_host()
    data = b"not an onnx graph"
    digest = source.add(data)
    manifest, mdigest = onnx_manifest(source, add_one(), **ADD_ONE_SPECS, **PROCESS)
    raw = manifest.model_dump(mode="json")
    raw["files"] = [{"path": "model.onnx", "digest": digest, "size": len(data)}]
    broken = type(manifest).model_validate(raw)
    with pytest.raises(Exception) as raised:
        load(host, source, broken, mdigest + "0", "broken")
    assert getattr(raised.value, "code", None) == "load_failed"
    status = host.status(VersionKey("acme/broken", "1", mdigest + "0"))
    assert status is not None and status.state == "failed"


def test_a_worker_slow_to_load_fails_the_load_at_the_start_timeout(
    tmp_path: Path, source: DictBlobSource, clock: ManualClock
) -> None:
    slow = FormatRegistry(
        {"misbehaving": {"intra_op_threads": 1, "load_seconds": 3600.0}},
        plugins={"misbehaving": MISBEHAVING},
    )
    ledger = CrashLedger(limit=3, window=60.0, clock=clock)
    host = ModelHost(
        cache=ModelCache(tmp_path / "cache"),
        formats=slow,
        budget=MemoryBudget(host_bytes=None),
        process_executors=ProcessExecutors(slow.spec, ledger=ledger, start_timeout=1.0),
    )
    try:
        with pytest.raises(Unavailable) as raised:
            load(host, source, *misbehaving(source), "sluggish")
        assert raised.value.code == "worker_start_timeout"
    finally:
        host.close()


def test_a_worker_outlives_neither_its_host_nor_its_hung_call() -> None:
    import signal
    import subprocess
    import sys

    host = subprocess.Popen(
        [sys.executable, "-m", "tests.runtime.process.orphan_host"], stdout=subprocess.PIPE
    )
    try:
        assert host.stdout is not None
        worker = int(host.stdout.readline())
        assert not gone(worker)
        host.send_signal(signal.SIGKILL)  # no clean-up of any kind
        host.wait()
        deadline = time.monotonic() + 60
        while not gone(worker) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert gone(worker), "the worker of a dead host kept running"
    finally:
        host.kill()
        host.wait()


def test_through_the_local_backend_crashes_and_quarantine_spare_the_hosts_breaker(
    make_process_host: ProcessHostFactory, source: DictBlobSource
) -> None:
    from modelport.serving.backends.local import LocalBackend
    from modelport.serving.breaker import BreakerState
    from modelport.serving.dispatch import Dispatcher
    from modelport.serving.health import HealthBoard
    from modelport.serving.types import BackendRequest, Capabilities, VersionRef

    host = make_process_host(crash_limit=2)
    manifest, digest = misbehaving(source)
    backend = LocalBackend(
        host,
        source,
        capabilities=Capabilities(
            formats=frozenset({"misbehaving"}),
            max_batch_size=1 << 20,
            hardware=frozenset({"cpu"}),
            protocols=frozenset({"v2"}),
        ),
    )
    board = HealthBoard()
    dispatcher = Dispatcher(board)
    version = VersionRef("acme/crashy", "1", digest, manifest)

    def call(first: float) -> Any:
        request = BackendRequest(
            version=version,
            inputs={"x": np.full((1, 4), first, np.float32)},
            deadline=time.monotonic() + 30,
        )
        return asyncio.run(dispatcher.dispatch(request, [backend]))

    codes = []
    for _ in range(3):  # two crashes, then the quarantine
        with pytest.raises((Internal, Unavailable)) as raised:
            call(EXIT)
        codes.append(raised.value.code)
    assert codes[:2] == ["execution_crashed", "execution_crashed"]
    assert codes[2] == "version_quarantined"
    assert board.breaker("local").state is BreakerState.CLOSED
    assert board.breaker("local").snapshot().failures == 0


def test_a_host_forced_to_process_execution_runs_a_thread_manifest_in_a_worker(
    make_process_host: ProcessHostFactory, source: DictBlobSource
) -> None:
    from modelport.runtime.types import Execution

    host = make_process_host(execution=Execution.PROCESS)
    key = load(host, source, *mlp_manifest(source, runtime={"execution": "thread"}), "forced")
    (pid,) = process_executor(host, key).pids
    assert pid != os.getpid()
    features = np.ones((2, 8), np.float32)
    assert infer(host, key, features=features)["probabilities"].shape == (2, 3)


def echo_text_manifest(source: DictBlobSource, **extra: Any) -> tuple[Any, str]:
    example = {
        "inputs": [
            {"name": "text", "datatype": "BYTES", "shape": [2], "data": ["hi", "ünïcødé"]},
            {"name": "x", "datatype": "FP32", "shape": [2, 4], "data": [0] * 8},
        ],
        "outputs": [
            {"name": "echo", "datatype": "BYTES", "shape": [2], "data": ["hi", "ünïcødé"]},
            {"name": "y", "datatype": "FP32", "shape": [2, 4], "data": [1] * 8},
        ],
    }
    return onnx_manifest(
        source,
        echo_text(),
        inputs=[
            {"name": "text", "datatype": "BYTES", "shape": [-1]},
            {"name": "x", "datatype": "FP32", "shape": [-1, 4]},
        ],
        outputs=[
            {"name": "echo", "datatype": "BYTES", "shape": [-1]},
            {"name": "y", "datatype": "FP32", "shape": [-1, 4]},
        ],
        example=example,
        **extra,
    )


def texts(*items: bytes) -> np.ndarray:
    out = np.empty(len(items), dtype=object)
    out[:] = items
    return out


def test_string_tensors_cross_to_a_worker_and_back_as_on_a_thread(
    make_process_host: ProcessHostFactory, source: DictBlobSource
) -> None:
    """A model host answers a tensor of strings with the elements' type a thread answers
    (onnxruntime gives ``str``), and both warm up on the example's strings."""
    host = make_process_host()
    threaded = load(host, source, *echo_text_manifest(source), "threaded-texts")
    separate = load(host, source, *echo_text_manifest(source, **PROCESS), "texts")
    assert process_executor(host, separate).pids[0] != os.getpid()
    # Empty, multi-byte and NUL-holding strings; then a batch that grows both segments.
    small = texts(b"", "naïve ✓".encode(), b"a\x00b")
    large = texts(*(f"row {i} ".encode() * 40 for i in range(2_000)))
    for text in (small, large):
        x = np.arange(len(text) * 4, dtype=np.float32).reshape(-1, 4)
        on_thread = infer(host, threaded, text=text, x=x)
        outputs = infer(host, separate, text=text, x=x)
        assert outputs["echo"].dtype == object and outputs["echo"].shape == text.shape
        assert outputs["echo"].tolist() == [item.decode() for item in text.tolist()]
        assert outputs["echo"].tolist() == on_thread["echo"].tolist()
        assert {type(item) for item in outputs["echo"].tolist()} == {str}
        assert {type(item) for item in on_thread["echo"].tolist()} == {str}
        np.testing.assert_array_equal(outputs["y"], x + 1)


def test_a_host_forced_to_process_execution_carries_string_tensors(
    make_process_host: ProcessHostFactory, source: DictBlobSource
) -> None:
    from modelport.runtime.types import Execution

    host = make_process_host(execution=Execution.PROCESS)
    key = load(host, source, *echo_text_manifest(source), "forced-texts")
    assert process_executor(host, key).pids[0] != os.getpid()
    x = np.zeros((2, 4), np.float32)
    assert infer(host, key, text=texts(b"a", b"b"), x=x)["echo"].tolist() == ["a", "b"]


def test_a_worker_lying_about_its_outputs_is_killed_with_a_clear_code(
    make_process_host: ProcessHostFactory, source: DictBlobSource
) -> None:
    host = make_process_host(crash_limit=len(LIES) + 1)
    manifest, digest = echo_text_manifest(source, **PROCESS)
    raw = manifest.model_dump(mode="json")
    raw["format"] = "lying"
    key = load(host, source, type(manifest).model_validate(raw), digest, "lying")
    x = np.zeros((1, 4), np.float32)
    for lie in LIES:
        # An honest answer comes back whole (from a restarted worker after a lie).
        assert infer(host, key, text=texts(b"honest"), x=x)["echo"].tolist() == ["honest"]
        (pid,) = process_executor(host, key).pids
        with pytest.raises(Internal) as raised:
            infer(host, key, text=texts(lie.encode()), x=x)
        assert raised.value.code == "invalid_worker_answer", lie
        assert "outside the protocol" in raised.value.message
        assert gone(pid)  # killed: nothing it says next is in step
