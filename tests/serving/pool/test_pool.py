"""The pool in one test process, on the real PostgreSQL and Redis: a gateway and
workers built as their roles build them (the workers' OIP gRPC servers listening on
loopback), their periodic steps driven by hand (manual clocks), so every stage is
seen in order: registration, placement spread over workers, loading and readiness,
calls over gRPC behind the worker token, a lapsed lease taking a worker out of every
route, and its replicas placed again."""

from __future__ import annotations

from collections.abc import Callable

import grpc
import numpy as np
import pytest
import redis

from modelport.api.grpc import oip_pb2 as pb
from modelport.serving.pool.placements import PlacementRepository
from modelport.serving.pool.types import READY
from tests.serving.conftest import ROW, Serving, add_constant
from tests.serving.pool.conftest import TOKEN, Worker, drive, pool_of


def infer(gateway: Serving, endpoint: str) -> np.ndarray:
    response = gateway.predict(endpoint)
    assert response.status_code == 200, response.text
    return np.asarray(response.json()["outputs"]["y"])


def test_versions_are_placed_spread_loaded_called_and_placed_again(
    gateway: Serving, start_worker: Callable[[str], Worker]
) -> None:
    workers = [start_worker("w1"), start_worker("w2"), start_worker("w3")]
    pool = pool_of(gateway)
    drive(gateway, workers, lambda: len(pool.view.workers) == 3)
    assert {w.id for w in workers} == set(pool.view.workers)
    assert 'modelport_pool_workers{pool="default"} 3.0' in gateway.client.get("/metrics").text

    gateway.publish("acme/plus-one", "1", add_constant(1.0))
    gateway.publish("acme/plus-two", "1", add_constant(2.0))
    gateway.endpoint("one")
    gateway.endpoint("two")
    two_each = {"min_replicas": 2, "max_replicas": 2}
    one = gateway.deploy("one", [("acme/plus-one:1", 100)], wait=False, resources=two_each)
    two = gateway.deploy("two", [("acme/plus-two:1", 100)], wait=False, resources=two_each)
    drive(
        gateway,
        workers,
        lambda: (
            gateway.deployment("one", one["id"])["state"] == "active"
            and gateway.deployment("two", two["id"])["state"] == "active"
        ),
    )
    drive(gateway, workers, lambda: all(len(pool.view.ready(r)) == 2 for r in
                                        ("acme/plus-one:1", "acme/plus-two:1")))  # fmt: skip
    placed = PlacementRepository(gateway.services.database).all()
    by_ref: dict[str, list[str]] = {}
    for replica in placed:
        by_ref.setdefault(replica.ref, []).append(replica.worker_id)
        assert replica.state == READY
    # Two replicas each, never both on one worker.
    assert {ref: len(set(ids)) for ref, ids in by_ref.items()} == {
        "acme/plus-one:1": 2,
        "acme/plus-two:1": 2,
    }

    # The gateway hosts nothing: these answers came from the workers, over gRPC.
    assert infer(gateway, "one").tolist() == [[v + 1 for v in ROW[0]]]
    assert infer(gateway, "two").tolist() == [[v + 2 for v in ROW[0]]]

    # The worker holding both versions' first replica stops heartbeating: its lease
    # lapses (Redis's TTL, cut short here) and it leaves every route.
    victim = next(w for w in workers if w.id in by_ref["acme/plus-one:1"])
    others = [w for w in workers if w is not victim]
    client = redis.Redis.from_url(gateway.services.settings.store.redis_url or "")
    keys = [k for k in client.scan_iter("modelport:*:workers:" + victim.id)]
    assert len(keys) == 1
    client.delete(keys[0])
    client.close()
    drive(gateway, others, lambda: victim.id not in pool.view.workers)
    for _ in range(5):  # calls keep being answered by the replicas left
        assert infer(gateway, "one").tolist() == [[v + 1 for v in ROW[0]]]
    # Its placements move to the live workers, loaded there and ready again.
    drive(gateway, others, lambda: all(len(pool.view.ready(r)) == 2 for r in
                                       ("acme/plus-one:1", "acme/plus-two:1")))  # fmt: skip
    after = PlacementRepository(gateway.services.database).all()
    assert victim.id not in {p.worker_id for p in after}
    assert sorted(p.ref for p in after) == sorted(["acme/plus-one:1"] * 2 + ["acme/plus-two:1"] * 2)


def test_a_worker_answers_its_gateways_token_only(
    gateway: Serving, start_worker: Callable[[str], Worker]
) -> None:
    worker = start_worker("w1")
    gateway.publish("acme/plus-one", "1", add_constant(1.0))
    assert worker.services.pool is not None
    address = worker.services.pool.address()

    def call(token: str | None, **fields: object) -> pb.ModelInferResponse:
        request = pb.ModelInferRequest(model_name="acme/plus-one", model_version="1")
        tensor = request.inputs.add(name="x", datatype="FP32", shape=[1, 4])
        tensor.contents.fp32_contents.extend(ROW[0])
        metadata = [] if token is None else [("authorization", f"Bearer {token}")]
        with grpc.insecure_channel(address) as channel:
            method = channel.unary_unary(
                "/inference.GRPCInferenceService/ModelInfer",
                request_serializer=pb.ModelInferRequest.SerializeToString,
                response_deserializer=pb.ModelInferResponse.FromString,
            )
            return method(request, metadata=metadata, timeout=10)  # type: ignore[no-any-return]

    for token in (None, "wrong", gateway.services.settings.security.admin_key):
        with pytest.raises(grpc.RpcError) as refused:
            call(token)
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert "worker_token_invalid" in (refused.value.details() or "")
    # The right token, but nothing placed here: refused as not ready, for this version only.
    with pytest.raises(grpc.RpcError) as not_ready:
        call(TOKEN)
    assert not_ready.value.code() == grpc.StatusCode.UNAVAILABLE
    trailers = dict(not_ready.value.trailing_metadata() or ())  # type: ignore[attr-defined]
    assert trailers["modelport-error-code"] == "model_not_ready"
    assert trailers["modelport-error-scope"] == "version"


def test_a_version_no_worker_can_take_fails_its_deployment_in_time(
    gateway: Serving, start_worker: Callable[[str], Worker]
) -> None:
    worker = start_worker("w1")
    pool = pool_of(gateway)
    drive(gateway, [worker], lambda: len(pool.view.workers) == 1)
    # A version for hardware no worker has.
    gateway.publish("acme/gpu", "1", add_constant(1.0), resources={"hardware": ["cuda"]})
    gateway.endpoint("gpu")
    made = gateway.deploy("gpu", [("acme/gpu:1", 100)], wait=False)
    drive(gateway, [worker], lambda: pool.placement.status  # type: ignore[truthy-function]
          is not None and bool(pool.placement._wants))  # fmt: skip
    assert PlacementRepository(gateway.services.database).all() == []
    gateway.clock.advance(gateway.services.settings.pool.place_timeout_seconds)
    drive(gateway, [worker], lambda: gateway.deployment("gpu", made["id"])["state"] == "failed")
    failed = gateway.deployment("gpu", made["id"])
    assert "no_worker_fits" in str(failed) or "not ready on any worker" in str(failed)
    assert "has none of cuda" in str(failed)
    # Calls to it meanwhile: no ready replica, a clear refusal.
    answer = gateway.client.post(
        "/v2/models/acme/gpu/versions/1/infer",
        json={"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": ROW[0]}]},
    )
    assert answer.status_code == 503, answer.text
    assert answer.json()["code"] == "no_ready_replica"
