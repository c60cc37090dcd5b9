"""The gRPC surface on the distributed shape's engines: the real PostgreSQL (and SQLite)
with Redis for the limits, the change events and the usage stream. A rate limit counted in
Redis refuses the call over it with RESOURCE_EXHAUSTED and when to retry, and the calls
answered reach the ledger as HTTP's do."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import grpc
import numpy as np
import pytest
import redis
import tritonclient.grpc as triton
from starlette.testclient import TestClient
from tritonclient.grpc import service_pb2, service_pb2_grpc

from modelport.api import create_app
from modelport.app import build_services
from modelport.config import Settings
from modelport.tenancy.limits import ScopeType
from tests.api_grpc.conftest import GrpcWorld, consumer_key, key
from tests.api_v2.conftest import AUTH, Publisher
from tests.conftest import ADMIN_KEY, LiveServer, skip_or_fail
from tests.isolation import REDIS_ENV, free_port
from tests.limits.conftest import clear_limits_keys
from tests.polling import eventually


@pytest.fixture
def distributed(tmp_path: Path, database_url: str) -> Iterator[GrpcWorld]:
    url = os.environ.get(REDIS_ENV)
    if not url:
        skip_or_fail(f"Redis tests need {REDIS_ENV} (e.g. redis://127.0.0.1:6379/0)")
    assert url is not None
    with redis.Redis.from_url(url) as client:
        clear_limits_keys(client)  # a copied SQLite database shares its installation's names
    port = free_port()
    settings = Settings(
        home=tmp_path / "home",
        database_url=database_url,
        redis_url=url,
        admin_key=ADMIN_KEY,
        auto_migrate=database_url.startswith("sqlite"),
        runtime_intra_op_threads=1,
        grpc_port=port,
    )
    services = build_services(settings)
    admin = TestClient(create_app(services), headers=dict(AUTH))  # the live server's lifespan
    server = LiveServer(services).start()
    client = triton.InferenceServerClient(f"127.0.0.1:{port}")
    try:
        yield GrpcWorld(
            f"127.0.0.1:{port}", server.url, services, Publisher(admin, services), client
        )
    finally:
        client.close()
        server.stop()
        services.close()


def test_a_redis_rate_limit_refuses_over_grpc_and_calls_reach_the_ledger(
    distributed: GrpcWorld,
) -> None:
    services, publisher = distributed.services, distributed.publisher
    publisher.adder()
    member = key(consumer_key(services, "acme"))
    services.limits.set_limits(
        ScopeType.TENANT, "acme", tenant=None, rpm=1, concurrency=None, tpm=None, actor="test"
    )
    x = triton.InferInput("x", [1, 4], "FP32")
    x.set_data_from_numpy(np.ones((1, 4), np.float32))
    answered = distributed.client.infer("acme/adder", [x], headers=member, request_id="g-1")
    np.testing.assert_array_equal(answered.as_numpy("y"), np.full((1, 4), 2, np.float32))
    with grpc.insecure_channel(distributed.address) as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        request = service_pb2.ModelInferRequest(model_name="acme/adder")
        request.inputs.add(name="x", datatype="FP32", shape=[1, 4])
        request.raw_input_contents.append(np.ones((1, 4), "<f4").tobytes())
        with pytest.raises(grpc.RpcError) as limited:
            stub.ModelInfer(request, metadata=tuple(member.items()))
    assert limited.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    trailers = dict(limited.value.trailing_metadata())
    assert trailers["modelport-error-code"] == "rate_limited"
    assert int(trailers["retry-after"]) >= 1

    def ledgered() -> bool:
        services.metering.deliver()
        events = [e.event for e in services.metering.ledger.entries()]
        return [(e.tenant, e.model, e.unit, e.status) for e in events] == [
            ("acme", "acme/adder", "prediction", "succeeded")
        ]

    assert eventually(ledgered), [e.event for e in services.metering.ledger.entries()]
