"""The model host with real ONNX models and controllable fake formats."""

from __future__ import annotations

import asyncio
import threading
import time

import numpy as np
import onnxruntime as ort
import pytest

from modelport.errors import Conflict, NotFound, Unavailable, Unprocessable
from modelport.runtime.admission import MemoryBudget
from modelport.runtime.types import LoadState, VersionKey
from tests.models import mlp
from tests.runtime.conftest import (
    DictBlobSource,
    FakeFormat,
    HostFactory,
    add_one_manifest,
    fake_manifest,
    mlp_manifest,
    onnx_manifest,
)

MB = 1 << 20


def infer(host, key: VersionKey, inputs, timeout: float = 5.0):
    async def call():
        return await host.infer(key, inputs, deadline=time.monotonic() + timeout)

    return asyncio.run(call())


def test_loads_in_phases_and_computes_what_onnxruntime_computes(
    make_host: HostFactory, source: DictBlobSource
) -> None:
    host = make_host()
    manifest, digest = mlp_manifest(source)
    key = VersionKey("acme/mlp", "1", digest)
    status = host.load(key, manifest, source)
    assert status.state is LoadState.READY
    assert set(status.phases) == {"fetch", "verify", "load", "warmup"}
    assert all(s >= 0 for s in status.phases.values())
    assert "no example" in status.warm_up
    assert status.host_memory_bytes >= manifest.files[0].size
    assert host.find("acme/mlp", "1") == key

    features = np.random.default_rng(1).standard_normal((5, 8)).astype(np.float32)
    result = infer(host, key, {"features": features})
    direct = ort.InferenceSession(mlp().SerializeToString(), providers=["CPUExecutionProvider"])
    (expected,) = direct.run(None, {"features": features})
    np.testing.assert_allclose(result.outputs["probabilities"], expected, rtol=1e-5, atol=1e-6)
    assert result.timings.batch_size == 5


def test_warm_up_runs_the_example_and_a_mismatch_fails_the_load(
    make_host: HostFactory, source: DictBlobSource
) -> None:
    host = make_host()
    manifest, digest = add_one_manifest(source)
    status = host.load(VersionKey("acme/add", "1", digest), manifest, source)
    assert "matched" in status.warm_up

    wrong = manifest.model_copy(
        update={
            "examples": [
                manifest.examples[0].model_copy(
                    update={
                        "outputs": [
                            manifest.examples[0]
                            .outputs[0]
                            .model_copy(update={"data": [9, 9, 9, 9]})
                        ]
                    }
                )
            ]
        }
    )
    key = VersionKey("acme/add", "2", "sha256:" + "1" * 64)
    with pytest.raises(Unprocessable) as info:
        host.load(key, wrong, source)
    assert info.value.code == "warmup_mismatch"
    failed = host.status(key)
    assert failed is not None and failed.state is LoadState.FAILED
    assert failed.cause_code == "warmup_mismatch" and "example 0" in (failed.cause or "")
    with pytest.raises(Unavailable) as refused:
        infer(host, key, {"x": np.zeros((1, 4), np.float32)})
    assert refused.value.code == "model_load_failed"


def test_a_second_cache_hit_is_verified_again(
    make_host: HostFactory, source: DictBlobSource
) -> None:
    host = make_host()
    manifest, digest = add_one_manifest(source)
    key = VersionKey("acme/add", "1", digest)
    host.load(key, manifest, source)
    host.unload(key)
    status = host.load(key, manifest, source)
    assert status.phases["verify"] > 0
    assert source.reads[manifest.files[0].digest] == 1


def test_a_corrupted_blob_fails_the_load_and_nothing_is_loaded(
    make_host: HostFactory, source: DictBlobSource, fake_format: FakeFormat
) -> None:
    host = make_host()
    manifest, digest = fake_manifest(source)
    source.blobs[manifest.files[0].digest] = b"tampered"
    key = VersionKey("acme/fake", "1", digest)
    with pytest.raises(Unavailable) as info:
        host.load(key, manifest, source)
    assert info.value.code == "blob_corrupted"
    assert fake_format.models == []
    status = host.status(key)
    assert status is not None and status.state is LoadState.FAILED
    assert status.cause_code == "blob_corrupted" and status.host_memory_bytes == 0


@pytest.mark.parametrize("fmt", ["pickle", "joblib"])
def test_unsafe_formats_are_refused(
    make_host: HostFactory, source: DictBlobSource, fmt: str
) -> None:
    host = make_host()
    manifest, digest = fake_manifest(source)
    manifest = manifest.model_copy(update={"format": fmt})
    key = VersionKey("acme/evil", "1", digest)
    with pytest.raises(Exception) as info:
        host.load(key, manifest, source)
    assert getattr(info.value, "code", None) == "unsafe_format"
    status = host.status(key)
    assert status is not None and status.cause_code == "unsafe_format"
    assert source.reads == {}  # refused before fetching anything


def test_a_load_that_raises_fails_only_that_version(
    make_host: HostFactory, source: DictBlobSource, fake_format: FakeFormat
) -> None:
    host = make_host()
    ok_manifest, ok_digest = add_one_manifest(source)
    ok = VersionKey("acme/add", "1", ok_digest)
    host.load(ok, ok_manifest, source)
    fake_format.fail_with = MemoryError("the model exploded")
    manifest, digest = fake_manifest(source)
    bad = VersionKey("acme/fake", "1", digest)
    with pytest.raises(Unavailable) as info:
        host.load(bad, manifest, source)
    assert info.value.code == "load_failed" and "exploded" in info.value.message
    assert infer(host, ok, {"x": np.ones((1, 4), np.float32)}).outputs["y"].tolist() == [[2] * 4]
    # An explicit load retries a failed version.
    fake_format.fail_with = None
    assert host.load(bad, manifest, source).state is LoadState.READY


def test_a_hung_load_is_abandoned_after_its_timeout(
    make_host: HostFactory, source: DictBlobSource, fake_format: FakeFormat
) -> None:
    host = make_host(load_timeout=0.2, budget=MemoryBudget(host_bytes=3 * MB))
    fake_format.estimate = 2 * MB
    fake_format.hang.set()
    manifest, digest = fake_manifest(source)
    key = VersionKey("acme/slow", "1", digest)
    started = time.monotonic()
    with pytest.raises(Unavailable) as info:
        host.load(key, manifest, source)
    # Abandoned: the hung load itself only returns after 30 s (when released, sooner).
    assert time.monotonic() - started < 20
    assert info.value.code == "load_timeout"
    status = host.status(key)
    assert status is not None and status.state is LoadState.FAILED
    assert status.cause is not None and "load timed out" in status.cause

    # The abandoned thread still holds its memory: a second version cannot fit yet.
    other, other_digest = fake_manifest(source, tag="b")
    fake_format.hang.clear()
    with pytest.raises(Unavailable) as refused:
        host.load(VersionKey("acme/other", "1", other_digest), other, source)
    assert refused.value.code == "insufficient_memory"
    # When the hung load finally returns, its model is dropped, and the memory comes back.
    fake_format.release.set()
    deadline = time.monotonic() + 30
    while not (fake_format.models and fake_format.models[0].unloaded):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert host.status(key).state is LoadState.FAILED
    deadline = time.monotonic() + 30
    while True:
        try:
            host.load(VersionKey("acme/other", "1", other_digest), other, source)
            break
        except Unavailable:
            assert time.monotonic() < deadline
            time.sleep(0.01)


def test_memory_admission_evicts_idle_versions_and_spares_pinned_ones(
    make_host: HostFactory, source: DictBlobSource, fake_format: FakeFormat
) -> None:
    fake_format.estimate = 4 * MB
    host = make_host(budget=MemoryBudget(host_bytes=9 * MB), memory_probe=lambda: 0)
    keys = []
    for tag in ("a", "b", "c"):
        manifest, digest = fake_manifest(source, tag=tag, resources={"host_memory_bytes": 4 * MB})
        keys.append((VersionKey(f"acme/{tag}", "1", digest), manifest))
    (a, ma), (b, mb), (c, mc) = keys
    host.load(a, ma, source, pinned=True)
    host.load(b, mb, source)
    host.load(c, mc, source)  # needs room: b is idle, a is pinned
    assert host.status(b) is None
    assert host.status(a).state is LoadState.READY and host.status(c).state is LoadState.READY
    assert fake_format.models[1].unloaded

    # Now c is idle and a pinned: b comes back by evicting c.
    host.load(b, mb, source)
    assert host.status(c) is None


def test_a_version_with_requests_in_flight_is_never_evicted(
    make_host: HostFactory, source: DictBlobSource, fake_format: FakeFormat
) -> None:
    host = make_host(budget=MemoryBudget(host_bytes=5 * MB), memory_probe=lambda: 0)
    busy_manifest, busy_digest = fake_manifest(
        source, tag="busy", resources={"host_memory_bytes": 4 * MB}
    )
    busy = VersionKey("acme/busy", "1", busy_digest)
    host.load(busy, busy_manifest, source)
    fake_format.models[0].gate.clear()
    newcomer, new_digest = fake_manifest(source, tag="new", resources={"host_memory_bytes": 4 * MB})

    async def scenario():
        call = asyncio.ensure_future(
            host.infer(busy, {"x": np.zeros((1, 4), np.float32)}, deadline=time.monotonic() + 60)
        )
        while not fake_format.models[0].started.is_set():
            await asyncio.sleep(0.001)
        with pytest.raises(Unavailable) as info:
            await asyncio.to_thread(
                host.load, VersionKey("acme/new", "1", new_digest), newcomer, source
            )
        fake_format.models[0].gate.set()
        await call
        return info.value

    error = asyncio.run(scenario())
    assert error.code == "insufficient_memory"
    assert "acme/busy:1" in error.message
    assert host.status(busy).state is LoadState.READY


def test_a_version_refused_for_memory_leaves_no_record(
    make_host: HostFactory, source: DictBlobSource
) -> None:
    host = make_host(budget=MemoryBudget(host_bytes=1 * MB))
    manifest, digest = fake_manifest(source, resources={"host_memory_bytes": 2 * MB})
    key = VersionKey("acme/big", "1", digest)
    with pytest.raises(Unavailable) as info:
        host.load(key, manifest, source)
    assert info.value.code == "insufficient_memory"
    assert host.status(key) is None and source.reads == {}


def test_unload_frees_and_later_requests_are_refused(
    make_host: HostFactory, source: DictBlobSource, fake_format: FakeFormat
) -> None:
    host = make_host()
    manifest, digest = fake_manifest(source)
    key = VersionKey("acme/fake", "1", digest)
    host.load(key, manifest, source)
    assert infer(host, key, {"x": np.zeros((2, 4), np.float32)}).outputs["y"].shape == (2, 4)
    host.unload(key)
    assert fake_format.models[0].unloaded
    assert host.status(key) is None and host.find("acme/fake", "1") is None
    with pytest.raises(Unavailable) as info:
        infer(host, key, {"x": np.zeros((1, 4), np.float32)})
    assert info.value.code == "model_not_loaded"
    with pytest.raises(NotFound):
        host.unload(key)


def test_on_demand_loading_joins_one_load_and_counts_one_cold_start(
    make_host: HostFactory, source: DictBlobSource, fake_format: FakeFormat
) -> None:
    cold: list[str] = []

    class Observer:
        def version(self, model: str, version: str):
            from modelport.runtime.observer import NullObserver

            inner = NullObserver().version(model, version)
            inner.cold_start = lambda: cold.append(f"{model}:{version}")  # type: ignore[method-assign]
            return inner

    host = make_host(observer=Observer())
    manifest, digest = fake_manifest(source)
    key = VersionKey("acme/fake", "1", digest)

    async def scenario():
        statuses = await asyncio.gather(
            *(host.ensure_loaded(key, manifest, source) for _ in range(5))
        )
        return statuses

    statuses = asyncio.run(scenario())
    assert all(s.state is LoadState.READY for s in statuses)
    assert len(fake_format.models) == 1
    assert cold == ["acme/fake:1"]


def test_the_same_version_with_another_manifest_is_a_conflict(
    make_host: HostFactory, source: DictBlobSource
) -> None:
    host = make_host()
    manifest, digest = fake_manifest(source)
    host.load(VersionKey("acme/fake", "1", digest), manifest, source)
    with pytest.raises(Conflict):
        host.load(VersionKey("acme/fake", "1", "sha256:" + "2" * 64), manifest, source)


def test_models_without_a_batch_dimension_are_not_batched(
    make_host: HostFactory, source: DictBlobSource
) -> None:
    host = make_host()
    manifest, digest = onnx_manifest(
        source,
        mlp(),
        inputs=[{"name": "features", "datatype": "FP32", "shape": [2, 8]}],
        outputs=[{"name": "probabilities", "datatype": "FP32", "shape": [2, 3]}],
        resources={"max_batch_size": 16},
    )
    status = host.load(VersionKey("acme/fixed", "1", digest), manifest, source)
    assert status.batching.max_batch_size == 1
    manifest, digest = mlp_manifest(
        source,
        resources={"max_batch_size": 16},
        runtime={"batching": {"preferred_batch_sizes": [4, 8, 99], "max_queue_delay_us": 250}},
    )
    status = host.load(VersionKey("acme/batched", "1", digest), manifest, source)
    assert status.batching.max_batch_size == 16
    assert status.batching.preferred_batch_sizes == (4, 8)
    assert status.batching.max_queue_delay_us == 250


def test_concurrent_requests_on_a_real_model_share_batches(
    make_host: HostFactory, source: DictBlobSource
) -> None:
    host = make_host()
    manifest, digest = mlp_manifest(source, resources={"max_batch_size": 64})
    key = VersionKey("acme/mlp", "1", digest)
    host.load(key, manifest, source)
    rng = np.random.default_rng(3)
    rows = [rng.standard_normal((1, 8)).astype(np.float32) for _ in range(64)]

    async def scenario():
        deadline = time.monotonic() + 10
        return await asyncio.gather(
            *(host.infer(key, {"features": r}, deadline=deadline) for r in rows)
        )

    results = asyncio.run(scenario())
    direct = ort.InferenceSession(mlp().SerializeToString(), providers=["CPUExecutionProvider"])
    (expected,) = direct.run(None, {"features": np.concatenate(rows)})
    for i, result in enumerate(results):
        np.testing.assert_allclose(result.outputs["probabilities"], expected[i : i + 1], rtol=1e-5)
    assert max(r.timings.batch_size for r in results) > 1


def test_requests_from_another_event_loop_get_their_own_batcher(
    make_host: HostFactory, source: DictBlobSource
) -> None:
    host = make_host()
    manifest, digest = add_one_manifest(source)
    key = VersionKey("acme/add", "1", digest)
    host.load(key, manifest, source)
    x = {"x": np.zeros((1, 4), np.float32)}
    assert infer(host, key, x).outputs["y"].tolist() == [[1.0] * 4]
    results: list[object] = []
    thread = threading.Thread(target=lambda: results.append(infer(host, key, x)))
    thread.start()
    thread.join(10)
    assert results and results[0].outputs["y"].tolist() == [[1.0] * 4]
