"""The gateway's reading of a worker's gRPC answers, and the settings that turn the pool
on: pure checks, no server."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import pytest
from pydantic import ValidationError

from modelport.api.grpc.worker_backend import refusal_of
from modelport.config import Role, Settings
from modelport.errors import DeadlineExceeded, InvalidInput, Overloaded, Unavailable
from tests.conftest import ADMIN_KEY


class Failed(grpc.aio.AioRpcError):
    def __init__(self, code: grpc.StatusCode, details: str, trailers: dict[str, str]) -> None:
        metadata = grpc.aio.Metadata(*trailers.items())
        super().__init__(code, grpc.aio.Metadata(), metadata, details)


def test_a_worker_that_cannot_be_reached_is_unavailable_and_counted() -> None:
    error = refusal_of(Failed(grpc.StatusCode.UNAVAILABLE, "connection refused", {}), "worker:w1")
    assert isinstance(error, Unavailable) and error.code == "backend_unreachable"
    assert "scope" not in error.extra  # held against the worker's breaker


def test_a_version_not_ready_there_is_version_scoped() -> None:
    error = refusal_of(
        Failed(
            grpc.StatusCode.UNAVAILABLE,
            "model_not_ready: acme/a:1 is not ready on this worker",
            {"modelport-error-code": "model_not_ready", "modelport-error-scope": "version"},
        ),
        "worker:w1",
    )
    assert isinstance(error, Unavailable) and error.code == "model_not_ready"
    assert error.extra["scope"] == "version"
    assert error.message == "acme/a:1 is not ready on this worker"


def test_the_callers_own_errors_keep_their_kind_and_code() -> None:
    invalid = refusal_of(
        Failed(
            grpc.StatusCode.INVALID_ARGUMENT,
            "invalid_tensor_shape: bad",
            {"modelport-error-code": "invalid_tensor_shape"},
        ),
        "worker:w1",
    )
    assert isinstance(invalid, InvalidInput) and invalid.code == "invalid_tensor_shape"
    busy = refusal_of(
        Failed(
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            "queue_full: busy",
            {"modelport-error-code": "queue_full", "retry-after": "2"},
        ),
        "worker:w1",
    )
    assert isinstance(busy, Overloaded) and busy.extra["retry_after"] == 2.0


def test_deadlines_tokens_and_internal_errors() -> None:
    late = refusal_of(Failed(grpc.StatusCode.DEADLINE_EXCEEDED, "late", {}), "worker:w1")
    assert isinstance(late, DeadlineExceeded)
    token = refusal_of(
        Failed(
            grpc.StatusCode.UNAUTHENTICATED,
            "worker_token_invalid: no",
            {"modelport-error-code": "worker_token_invalid"},
        ),
        "worker:w1",
    )
    assert isinstance(token, Unavailable) and token.code == "backend_unauthorized"
    broken = refusal_of(
        Failed(grpc.StatusCode.INTERNAL, "internal_error: x", {"modelport-error-code": "x"}),
        "worker:w1",
    )
    assert isinstance(broken, Unavailable) and broken.code == "backend_error"


def test_the_worker_token_is_its_own_secret(tmp_path: Path) -> None:
    base = {"home": tmp_path, "admin_key": ADMIN_KEY, "role": Role.GATEWAY}
    with pytest.raises(ValidationError, match="differ from the admin key"):
        Settings(**base, worker_token=ADMIN_KEY)
    with pytest.raises(ValidationError, match="at least 24"):
        Settings(**base, worker_token="short")
    with pytest.raises(ValidationError, match="outlast"):
        Settings(**base, worker_heartbeat_seconds=5, worker_lease_seconds=5)
    token = "t" * 32
    assert not Settings(**base, worker_token=token).worker_pool_on  # no Redis
    assert Settings(**base, worker_token=token, redis_url="redis://x/0").worker_pool_on
    embedded = {**base, "role": Role.ALL}
    assert not Settings(**embedded, worker_token=token, redis_url="redis://x/0").worker_pool_on


def test_the_channels_of_lost_workers_are_closed() -> None:
    asyncio.run(_lost_workers_channels())


async def _lost_workers_channels() -> None:
    from modelport.api.grpc.worker_backend import WorkerChannels
    from modelport.serving.pool.types import WorkerInfo

    channels = WorkerChannels("t" * 32, 1 << 20)
    one = WorkerInfo(id="w1", address="127.0.0.1:1")
    two = WorkerInfo(id="w2", address="127.0.0.1:2")
    first = channels.backend(one)
    assert channels.backend(one) is first  # one backend per worker, one channel per address
    channels.backend(two)
    assert sorted(channels._channels) == ["127.0.0.1:1", "127.0.0.1:2"]
    channels.forget(lambda worker: worker == "w2")  # w1's lease lapsed
    channels.backend(two)
    assert sorted(channels._channels) == ["127.0.0.1:2"]
    assert channels.backend(one) is not first  # back: a new backend, a new channel
    await channels.close()
    assert channels._channels == {}
