"""The remote Open Inference Protocol backend against a second modelport process:
correct numbers, errors mapped, retries onto another replica, and circuit breaking
and recovery when that process is killed and started again."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Coroutine
from typing import Any, TypeVar

import numpy as np
import onnxruntime as ort
import pytest

from modelport.errors import DeadlineExceeded, InvalidInput, Unavailable
from modelport.serving.backends.remote_v2 import RemoteV2Backend
from modelport.serving.breaker import BreakerConfig, BreakerState
from modelport.serving.dispatch import Dispatcher
from modelport.serving.health import HealthBoard, HealthProber
from modelport.serving.types import BackendRequest, Health, VersionRef
from tests.conftest import free_port
from tests.models import mlp
from tests.serving.backend_support import version_ref
from tests.serving.backends.conftest import ModelportProcess

T = TypeVar("T")
X = np.array([[1, 2, 3, 4], [5, 6, 7, 8]], dtype=np.float32)


def request(version: VersionRef, timeout: float = 30.0, **inputs: np.ndarray) -> BackendRequest:
    return BackendRequest(
        version=version, inputs=inputs or {"x": X}, deadline=time.monotonic() + timeout
    )


def with_backend(backend: RemoteV2Backend, body: Coroutine[Any, Any, T]) -> T:
    async def scenario() -> T:
        try:
            return await body
        finally:
            await backend.close()

    return asyncio.run(scenario())


def backend_for(remote: ModelportProcess, **options: Any) -> RemoteV2Backend:
    return RemoteV2Backend("remote", remote.url, api_key=remote.key, **options)


@pytest.mark.slow
def test_remote_answers_with_the_right_numbers(remote: ModelportProcess) -> None:
    adder = remote.versions["acme/adder:1"]
    backend = backend_for(remote)
    response = with_backend(backend, backend.infer(request(adder)))
    np.testing.assert_array_equal(response.outputs["y"], X + 1)
    assert response.outputs["y"].dtype == np.float32
    assert response.backend == "remote"


@pytest.mark.slow
def test_remote_mlp_matches_onnxruntime_run_here(remote: ModelportProcess) -> None:
    features = np.random.default_rng(7).normal(size=(5, 8)).astype(np.float32)
    session = ort.InferenceSession(mlp().SerializeToString(), providers=["CPUExecutionProvider"])
    expected = session.run(["probabilities"], {"features": features})[0]
    backend = backend_for(remote)
    version = remote.versions["acme/mlp:1"]
    response = with_backend(backend, backend.infer(request(version, features=features)))
    np.testing.assert_allclose(response.outputs["probabilities"], expected, rtol=1e-6)


@pytest.mark.slow
def test_health_probe(remote: ModelportProcess) -> None:
    live = backend_for(remote)
    assert with_backend(live, live.health()) is Health.HEALTHY
    dead = RemoteV2Backend("dead", f"http://127.0.0.1:{free_port()}")
    assert with_backend(dead, dead.health()) is Health.UNHEALTHY


@pytest.mark.slow
def test_refused_input_is_invalid_input(remote: ModelportProcess) -> None:
    adder = remote.versions["acme/adder:1"]
    backend = backend_for(remote)
    with pytest.raises(InvalidInput) as caught:
        with_backend(backend, backend.infer(request(adder, x=np.ones((2, 3), np.float32))))
    assert caught.value.code == "invalid_request"
    assert "'x'" in caught.value.message, "the remote's explanation is kept"


@pytest.mark.slow
def test_unknown_model_is_version_scoped_unavailable(remote: ModelportProcess) -> None:
    backend = backend_for(remote)
    with pytest.raises(Unavailable) as caught:
        with_backend(backend, backend.infer(request(version_ref("acme/nothing"))))
    assert caught.value.code == "backend_model_not_found"
    assert caught.value.extra["scope"] == "version"


@pytest.mark.slow
def test_model_names_can_be_mapped_for_triton_style_servers(remote: ModelportProcess) -> None:
    backend = backend_for(remote, models={"acme/adder-alias": "acme/adder"})
    aliased = version_ref("acme/adder-alias")
    response = with_backend(backend, backend.infer(request(aliased)))
    np.testing.assert_array_equal(response.outputs["y"], X + 1)


@pytest.mark.slow
def test_wrong_credentials_are_unavailable_not_the_callers_fault(remote: ModelportProcess) -> None:
    backend = RemoteV2Backend("remote", remote.url, api_key="not-the-key-" + "z" * 20)
    with pytest.raises(Unavailable) as caught:
        with_backend(backend, backend.infer(request(remote.versions["acme/adder:1"])))
    assert caught.value.code == "backend_unauthorized"


def test_unreachable_server() -> None:
    backend = RemoteV2Backend("gone", f"http://127.0.0.1:{free_port()}")
    with pytest.raises(Unavailable) as caught:
        with_backend(backend, backend.infer(request(version_ref())))
    assert caught.value.code == "backend_unreachable"


def test_a_server_that_never_answers_runs_into_the_deadline() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)  # accepts connections (the kernel does), never answers
        port = listener.getsockname()[1]
        backend = RemoteV2Backend("mute", f"http://127.0.0.1:{port}")
        started = time.monotonic()
        with pytest.raises(DeadlineExceeded):
            with_backend(backend, backend.infer(request(version_ref(), timeout=0.3)))
        assert time.monotonic() - started < 2.0


@pytest.mark.slow
def test_a_failed_attempt_is_retried_on_another_replica(remote: ModelportProcess) -> None:
    dead = RemoteV2Backend("replica-dead", f"http://127.0.0.1:{free_port()}")
    live = RemoteV2Backend("replica-live", remote.url, api_key=remote.key)
    dispatcher = Dispatcher(HealthBoard())

    async def scenario() -> Any:
        try:
            return await dispatcher.dispatch(request(remote.versions["acme/adder:1"]), [dead, live])
        finally:
            await dead.close()
            await live.close()

    served = asyncio.run(scenario())
    np.testing.assert_array_equal(served.outputs["y"], X + 1)
    assert served.provenance.backend == "replica-live"
    assert [(a.backend, a.outcome) for a in served.provenance.attempts] == [
        ("replica-dead", "backend_unreachable"),
        ("replica-live", "ok"),
    ]


@pytest.mark.slow
def test_breaker_opens_when_the_remote_dies_and_closes_after_it_restarts(
    remote: ModelportProcess,
) -> None:
    """Kill the remote: failures open its breaker and requests stop reaching it; after
    the cool-down a probe is the half-open trial (failing while the process is down);
    once it runs again a probe closes the breaker and requests are answered."""
    adder = remote.versions["acme/adder:1"]
    transitions: list[str] = []
    # The breakers' clock moves only when the test moves it: an open breaker stays open
    # (and refuses) however slowly a loaded machine runs the next call.
    now = [0.0]
    board = HealthBoard(
        BreakerConfig(min_calls=3, failure_rate=0.5, open_seconds=0.3),
        clock=lambda: now[0],
        on_change=lambda name, before, after: transitions.append(after.value),
    )
    backend = backend_for(remote)
    board.register(backend)
    breaker = board.breaker("remote")
    dispatcher = Dispatcher(board)
    prober = HealthProber(board, interval=0.05, timeout=5.0)

    async def until(condition: Any, seconds: float = 30.0) -> None:
        deadline = time.monotonic() + seconds
        while not condition():
            assert time.monotonic() < deadline, f"timed out; transitions so far {transitions}"
            await asyncio.sleep(0.02)

    async def scenario() -> None:
        served = await dispatcher.dispatch(request(adder), [backend])
        np.testing.assert_array_equal(served.outputs["y"], X + 1)
        remote.kill()
        for _ in range(2):
            with pytest.raises(Unavailable) as failed:
                await dispatcher.dispatch(request(adder), [backend])
            assert failed.value.code == "backend_unreachable"
        assert breaker.state is BreakerState.OPEN
        with pytest.raises(Unavailable) as refused:
            await dispatcher.dispatch(request(adder), [backend])
        assert refused.value.code == "no_available_backend"
        async with prober.running():
            # Down: after the cool-down, a half-open trial probe fails and opens the
            # breaker again.
            now[0] += 0.3
            await until(lambda: transitions.count("open") >= 2)
            await asyncio.to_thread(remote.start)

            def closed() -> bool:
                now[0] += 0.3  # a cool-down each look: a trial that failed gets another
                return breaker.state is BreakerState.CLOSED

            await until(closed)
        served = await dispatcher.dispatch(request(adder), [backend])
        np.testing.assert_array_equal(served.outputs["y"], X + 1)
        await backend.close()

    try:
        asyncio.run(scenario())
    finally:
        if remote.proc is None:
            remote.start()
    assert transitions[:4] == ["open", "half_open", "open", "half_open"]
    assert transitions[-1] == "closed"
    assert board.health("remote") is Health.HEALTHY
