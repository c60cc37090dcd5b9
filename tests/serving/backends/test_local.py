"""The local model host as a backend: cold start on demand, real numbers, timings,
and failures about one version marked so they never trip the backend's breaker."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from modelport.errors import ModelportError, Unavailable
from modelport.manifest import Manifest
from modelport.runtime.admission import MemoryBudget
from modelport.runtime.cache import ModelCache
from modelport.runtime.formats import FormatRegistry
from modelport.runtime.host import ModelHost
from modelport.serving.backends.local import LocalBackend
from modelport.serving.breaker import BreakerState
from modelport.serving.dispatch import Dispatcher
from modelport.serving.health import HealthBoard
from modelport.serving.types import BackendRequest, Health, VersionRef
from tests.runtime.conftest import DictBlobSource, add_one_manifest, onnx_manifest
from tests.serving.backend_support import version_ref

X = np.array([[1, 2, 3, 4], [0, 0, 0, 0]], dtype=np.float32)


@pytest.fixture
def host(tmp_path: Path) -> Iterator[ModelHost]:
    built = ModelHost(
        cache=ModelCache(tmp_path / "cache"),
        formats=FormatRegistry({"onnx": {"intra_op_threads": 1}}),
        budget=MemoryBudget(host_bytes=None),
    )
    yield built
    built.close()


def ref(manifest: Manifest, digest: str, model: str = "acme/adder") -> VersionRef:
    return VersionRef(model, "1", digest, manifest)


def call(backend: LocalBackend, version: VersionRef, timeout: float = 30.0, **kw: object):
    request = BackendRequest(
        version=version, inputs={"x": X}, deadline=time.monotonic() + timeout, **kw
    )
    return asyncio.run(backend.infer(request))


def test_cold_start_then_answers_with_runtime_timings(host: ModelHost) -> None:
    source = DictBlobSource()
    manifest, digest = add_one_manifest(source)
    backend = LocalBackend(host, source)
    assert asyncio.run(backend.health()) is Health.HEALTHY
    assert "onnx" in backend.capabilities().formats
    response = call(backend, ref(manifest, digest))
    np.testing.assert_array_equal(response.outputs["y"], X + 1)
    assert response.backend == "local"
    assert set(response.timings) == {"queue", "execute"}
    assert response.batch_size == 2


def test_requested_outputs_only(host: ModelHost) -> None:
    source = DictBlobSource()
    manifest, digest = add_one_manifest(source)
    response = call(LocalBackend(host, source), ref(manifest, digest), outputs=("y",))
    assert list(response.outputs) == ["y"]


def test_without_load_on_demand_an_unloaded_version_is_version_scoped(host: ModelHost) -> None:
    source = DictBlobSource()
    manifest, digest = add_one_manifest(source)
    backend = LocalBackend(host, source, load_on_demand=False)
    with pytest.raises(Unavailable) as caught:
        call(backend, ref(manifest, digest))
    assert caught.value.code == "model_not_loaded"
    assert caught.value.extra["scope"] == "version"


def test_a_version_that_fails_to_load_does_not_open_the_local_breaker(host: ModelHost) -> None:
    """The local backend keeps serving other versions while one cannot load."""
    source = DictBlobSource()
    wrong_example = {
        "inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1, 2, 3, 4]}],
        "outputs": [{"name": "y", "datatype": "FP32", "shape": [1, 4], "data": [9, 9, 9, 9]}],
    }
    from tests.models import add_one

    broken, broken_digest = onnx_manifest(
        source,
        add_one(),
        inputs=[{"name": "x", "datatype": "FP32", "shape": [-1, 4]}],
        outputs=[{"name": "y", "datatype": "FP32", "shape": [-1, 4]}],
        example=wrong_example,
    )
    good, good_digest = add_one_manifest(source)
    backend = LocalBackend(host, source)
    board = HealthBoard()
    dispatcher = Dispatcher(board)

    async def scenario() -> None:
        for _ in range(6):
            request = BackendRequest(
                version=ref(broken, broken_digest, "acme/broken"),
                inputs={"x": X},
                deadline=time.monotonic() + 30,
            )
            with pytest.raises(Unavailable) as caught:
                await dispatcher.dispatch(request, [backend])
            assert caught.value.code in ("warmup_mismatch", "model_load_failed")
        good_request = BackendRequest(
            version=ref(good, good_digest), inputs={"x": X}, deadline=time.monotonic() + 30
        )
        served = await dispatcher.dispatch(good_request, [backend])
        np.testing.assert_array_equal(served.outputs["y"], X + 1)

    asyncio.run(scenario())
    assert board.breaker("local").state is BreakerState.CLOSED
    assert board.breaker("local").snapshot().failures == 0


def test_a_format_without_a_runtime_is_never_sent_to_the_local_backend(host: ModelHost) -> None:
    backend = LocalBackend(host, DictBlobSource())
    dispatcher = Dispatcher(HealthBoard())
    version = version_ref(fmt="tflite")
    request = BackendRequest(version=version, inputs={"x": X}, deadline=time.monotonic() + 5)
    with pytest.raises(Unavailable) as caught:
        asyncio.run(dispatcher.dispatch(request, [backend]))
    assert caught.value.code == "no_capable_backend"
    assert host.statuses() == [], "nothing was loaded or attempted"


def _reshape_to_2x2() -> object:
    """x [-1, 4] → y = reshape(x, [2, 2]): runs for one row, fails at execution for two."""
    from onnx import TensorProto, helper, numpy_helper

    shape = numpy_helper.from_array(np.array([2, 2], dtype=np.int64), "shape")
    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "shape"], ["y"])],
        "reshape",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 2])],
        initializer=[shape],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def test_a_model_failing_at_execution_is_a_500_that_does_not_open_the_breaker(
    host: ModelHost,
) -> None:
    """The model's own failure reaches the caller as itself, and other versions keep
    being served by the same host."""
    source = DictBlobSource()
    failing, failing_digest = onnx_manifest(
        source,
        _reshape_to_2x2(),
        inputs=[{"name": "x", "datatype": "FP32", "shape": [-1, 4]}],
        outputs=[{"name": "y", "datatype": "FP32", "shape": [-1, 2]}],
        example={
            "inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1, 2, 3, 4]}],
            "outputs": [{"name": "y", "datatype": "FP32", "shape": [2, 2], "data": [1, 2, 3, 4]}],
        },
    )
    good, good_digest = add_one_manifest(source)
    backend = LocalBackend(host, source)
    board = HealthBoard()
    dispatcher = Dispatcher(board)

    async def scenario() -> None:
        for _ in range(8):
            request = BackendRequest(
                version=ref(failing, failing_digest, "acme/failing"),
                inputs={"x": X},
                deadline=time.monotonic() + 30,
            )
            with pytest.raises(ModelportError) as caught:
                await dispatcher.dispatch(request, [backend])
            assert caught.value.code == "execution_failed"
            assert caught.value.kind == "internal"
        good_request = BackendRequest(
            version=ref(good, good_digest), inputs={"x": X}, deadline=time.monotonic() + 30
        )
        served = await dispatcher.dispatch(good_request, [backend])
        np.testing.assert_array_equal(served.outputs["y"], X + 1)

    asyncio.run(scenario())
    assert board.breaker("local").state is BreakerState.CLOSED
