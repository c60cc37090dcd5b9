"""The official ``tritonclient.grpc`` client against the OIP gRPC surface of a live server:
health, metadata, inference of a version and of an endpoint, BYTES and typed contents,
the repository and statistics extensions, refusals with their codes, and metering like
HTTP's."""

from __future__ import annotations

import grpc
import numpy as np
import onnx
import pytest
import tritonclient.grpc as triton
from onnx import TensorProto, helper
from tritonclient.grpc import service_pb2, service_pb2_grpc
from tritonclient.utils import InferenceServerException

from modelport.metering.types import Unit
from modelport.tenancy.limits import ScopeType
from tests.api_grpc.conftest import ADMIN, GrpcWorld, consumer_key, deploy, key
from tests.api_v2.conftest import AUTH, infer_body
from tests.conftest import ADMIN_KEY

X = np.arange(12, dtype=np.float32).reshape(3, 4)


def x_input(array: np.ndarray = X) -> triton.InferInput:
    tensor = triton.InferInput("x", list(array.shape), "FP32")
    tensor.set_data_from_numpy(array)
    return tensor


def refusal(call) -> tuple[grpc.StatusCode, str]:  # type: ignore[no-untyped-def]
    """The status and the stable error code of a refused call (``code: message``)."""
    with pytest.raises(InferenceServerException) as refused:
        call()
    raw = refused.value
    details = raw.message() or ""
    return raw.status(), details.split(":", 1)[0]


def echo() -> onnx.ModelProto:
    """text [-1] BYTES -> echo [-1] BYTES, unchanged."""
    graph = helper.make_graph(
        [helper.make_node("Identity", ["text"], ["echo"])],
        "echo",
        [helper.make_tensor_value_info("text", TensorProto.STRING, [None])],
        [helper.make_tensor_value_info("echo", TensorProto.STRING, [None])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def test_health_metadata_load_infer_unload_statistics(grpc_world: GrpcWorld) -> None:
    client, publisher = grpc_world.client, grpc_world.publisher
    publisher.adder("acme/fraud-risk", version="3")
    assert client.is_server_live()
    assert client.is_server_ready()
    server = client.get_server_metadata(headers=ADMIN, as_json=True)
    assert server["name"] == "modelport"
    assert {"binary_tensor_data", "model_repository", "statistics"} <= set(server["extensions"])

    assert not client.is_model_ready("acme/fraud-risk", "3", headers=ADMIN)
    client.load_model("acme/fraud-risk", headers=ADMIN)
    assert client.is_model_ready("acme/fraud-risk", "3", headers=ADMIN)
    assert client.is_model_ready("acme/fraud-risk", headers=ADMIN)
    metadata = client.get_model_metadata("acme/fraud-risk", "3", headers=ADMIN, as_json=True)
    assert metadata["versions"] == ["3"] and metadata["platform"] == "onnx"
    assert metadata["inputs"] == [{"name": "x", "datatype": "FP32", "shape": ["-1", "4"]}]
    index = client.get_model_repository_index(headers=ADMIN, as_json=True)
    assert index["models"] == [{"name": "acme/fraud-risk", "version": "3", "state": "READY"}]

    wanted = triton.InferRequestedOutput("y")
    result = client.infer(
        "acme/fraud-risk",
        [x_input()],
        model_version="3",
        outputs=[wanted],
        headers=ADMIN,
        request_id="r-1",
    )
    np.testing.assert_array_equal(result.as_numpy("y"), X + 1)
    response = result.get_response()
    assert (response.model_name, response.model_version, response.id) == (
        "acme/fraud-risk",
        "3",
        "r-1",
    )
    # Triton's timeout parameter (microseconds), priority and the gRPC deadline.
    result = client.infer(
        "acme/fraud-risk", [x_input()], headers=ADMIN, timeout=5_000_000, priority=2
    )
    np.testing.assert_array_equal(result.as_numpy("y"), X + 1)
    result = client.infer("acme/fraud-risk", [x_input()], headers=ADMIN, client_timeout=30)
    np.testing.assert_array_equal(result.as_numpy("y"), X + 1)

    (stats,) = client.get_inference_statistics("acme/fraud-risk", "3", headers=ADMIN, as_json=True)[
        "model_stats"
    ]
    assert stats["name"] == "acme/fraud-risk" and stats["version"] == "3"
    assert stats["inference_stats"]["success"]["count"] == "3"
    assert stats["inference_count"] == "9"  # rows, as Triton counts them
    every = client.get_inference_statistics(headers=ADMIN, as_json=True)["model_stats"]
    assert [s["name"] for s in every] == ["acme/fraud-risk"]

    client.unload_model("acme/fraud-risk", headers=ADMIN)
    assert not client.is_model_ready("acme/fraud-risk", "3", headers=ADMIN)


def test_bytes_tensors_and_typed_contents(grpc_world: GrpcWorld) -> None:
    client, publisher = grpc_world.client, grpc_world.publisher
    publisher.publish(
        "acme/echo",
        "1",
        echo(),
        inputs=[{"name": "text", "datatype": "BYTES", "shape": [-1]}],
        outputs=[{"name": "echo", "datatype": "BYTES", "shape": [-1]}],
    )
    texts = np.array([b"hello", "gr\u00fc\u00dfe".encode(), b""], dtype=object)
    tensor = triton.InferInput("text", [3], "BYTES")
    tensor.set_data_from_numpy(texts)
    result = client.infer("acme/echo", [tensor], headers=ADMIN)
    assert result.as_numpy("echo").tolist() == texts.tolist()

    # Typed contents (no raw_input_contents), with Triton's own generated messages: the
    # wire format is the protocol's, whoever generated the code.
    publisher.adder()
    with grpc.insecure_channel(grpc_world.address) as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        request = service_pb2.ModelInferRequest(model_name="acme/adder")
        request.inputs.add(name="x", datatype="FP32", shape=[1, 4]).contents.fp32_contents.extend(
            [1, 2, 3, 4]
        )
        answer = stub.ModelInfer(request, metadata=tuple(ADMIN.items()))
        (output,) = answer.outputs
        assert (output.name, output.datatype, list(output.shape)) == ("y", "FP32", [1, 4])
        y = np.frombuffer(answer.raw_output_contents[0], dtype="<f4")
        assert y.tolist() == [2, 3, 4, 5]

        typed = service_pb2.ModelInferRequest(model_name="acme/echo")
        typed.inputs.add(name="text", datatype="BYTES", shape=[2]).contents.bytes_contents.extend(
            [b"a", b"bc"]
        )
        answer = stub.ModelInfer(typed, metadata=tuple(ADMIN.items()))
        raw = answer.raw_output_contents[0]
        assert raw == b"\x01\x00\x00\x00a\x02\x00\x00\x00bc"  # the binary BYTES layout

        short = service_pb2.ModelInferRequest(model_name="acme/adder")
        short.inputs.add(name="x", datatype="FP32", shape=[1, 4]).contents.fp32_contents.extend(
            [1, 2]
        )
        with pytest.raises(grpc.RpcError) as refused:
            stub.ModelInfer(short, metadata=tuple(ADMIN.items()))
        assert refused.value.code() is grpc.StatusCode.INVALID_ARGUMENT
        trailers = dict(refused.value.trailing_metadata())
        assert trailers["modelport-error-code"] == "invalid_tensor_data"


def test_an_endpoint_is_called_by_its_name(grpc_world: GrpcWorld) -> None:
    client, publisher = grpc_world.client, grpc_world.publisher
    publisher.adder("acme/fraud", "1")
    deploy(grpc_world, "fraud", "acme/fraud:1")
    assert client.is_model_ready("fraud", headers=ADMIN)
    with httpx_client(grpc_world, {"Authorization": f"Bearer {ADMIN_KEY}"}) as http:
        made = http.post("/api/endpoints", json={"name": "empty", "tenant": "acme"})
        assert made.status_code == 201, made.text
    assert not client.is_model_ready("empty", headers=ADMIN)  # no active deployment yet
    metadata = client.get_model_metadata("fraud", headers=ADMIN, as_json=True)
    assert metadata["name"] == "fraud" and metadata["versions"] == ["acme/fraud:1"]
    result = client.infer("fraud", [x_input()], headers=ADMIN)
    np.testing.assert_array_equal(result.as_numpy("y"), X + 1)
    response = result.get_response()
    assert (response.model_name, response.model_version) == ("fraud", "acme/fraud:1")
    services = grpc_world.services
    services.metering.deliver()
    events = [e.event for e in services.metering.ledger.entries() if e.event.unit == "prediction"]
    assert [(e.endpoint, e.model, e.version) for e in events] == [("fraud", "acme/fraud", "1")]
    status, code = refusal(lambda: client.infer("nowhere", [x_input()], headers=ADMIN))
    assert (status, code) == ("StatusCode.NOT_FOUND", "model_not_found")


def test_refusals_carry_their_status_and_code(grpc_world: GrpcWorld) -> None:
    client, publisher, services = grpc_world.client, grpc_world.publisher, grpc_world.services
    publisher.adder()
    infer = client.infer

    assert refusal(lambda: infer("acme/adder", [x_input()])) == (
        "StatusCode.UNAUTHENTICATED",
        "missing_credentials",
    )
    assert refusal(lambda: infer("acme/adder", [x_input()], headers=key("mp_wrong"))) == (
        "StatusCode.UNAUTHENTICATED",
        "invalid_credentials",
    )
    assert refusal(lambda: client.get_server_metadata()) == (
        "StatusCode.UNAUTHENTICATED",
        "missing_credentials",
    )
    assert refusal(lambda: infer("acme/missing", [x_input()], headers=ADMIN)) == (
        "StatusCode.NOT_FOUND",
        "model_not_found",
    )
    status, code = refusal(lambda: infer("acme/adder", [x_input(X[:, :3].copy())], headers=ADMIN))
    assert (status, code) == ("StatusCode.INVALID_ARGUMENT", "invalid_input")

    # A consumer of another tenant does not see acme's private model; one of acme's own
    # may call it but not load it.
    stranger = key(consumer_key(services, "beta"))
    assert refusal(lambda: infer("acme/adder", [x_input()], headers=stranger)) == (
        "StatusCode.NOT_FOUND",
        "model_not_found",
    )
    member = key(consumer_key(services, "acme"))
    np.testing.assert_array_equal(
        infer("acme/adder", [x_input()], headers=member).as_numpy("y"), X + 1
    )
    status, _ = refusal(lambda: client.load_model("acme/adder", headers=member))
    assert status == "StatusCode.PERMISSION_DENIED"
    # Loading with files (Triton's override) is refused, as on HTTP.
    status, code = refusal(
        lambda: client.load_model("acme/adder", headers=ADMIN, files={"file:1/model.onnx": b""})
    )
    assert (status, code) == ("StatusCode.INVALID_ARGUMENT", "unsupported_parameter")

    # Rate limited: RESOURCE_EXHAUSTED, the code and when to retry in the trailers.
    services.limits.set_limits(
        ScopeType.TENANT, "acme", tenant=None, rpm=1, concurrency=None, tpm=None, actor="test"
    )
    infer("acme/adder", [x_input()], headers=member)
    with grpc.insecure_channel(grpc_world.address) as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        request = service_pb2.ModelInferRequest(model_name="acme/adder")
        request.inputs.add(name="x", datatype="FP32", shape=[1, 4])
        request.raw_input_contents.append(np.ones((1, 4), "<f4").tobytes())
        with pytest.raises(grpc.RpcError) as limited:
            stub.ModelInfer(request, metadata=tuple(member.items()))
    assert limited.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert limited.value.details().startswith("rate_limited: ")
    trailers = dict(limited.value.trailing_metadata())
    assert trailers["modelport-error-code"] == "rate_limited"
    assert int(trailers["retry-after"]) >= 1


def test_a_grpc_call_is_metered_like_an_http_one(grpc_world: GrpcWorld) -> None:
    publisher, services = grpc_world.publisher, grpc_world.services
    publisher.adder()
    member = consumer_key(services, "acme")
    headers = {"Authorization": f"Bearer {member}"}
    with httpx_client(grpc_world, headers) as http:
        answered = http.post("/v2/models/acme/adder/infer", json=infer_body("x", X))
        assert answered.status_code == 200, answered.text
    grpc_world.client.infer("acme/adder", [x_input()], headers=key(member))
    services.metering.deliver()
    events = [e.event for e in services.metering.ledger.entries()]
    assert len(events) == 2 and {e.unit for e in events} == {Unit.PREDICTION}

    def shape(event):  # type: ignore[no-untyped-def]
        return (
            event.tenant,
            event.key_id,
            event.model,
            event.version,
            event.quantity,
            event.status,
            event.endpoint,
            event.amount_micros,
        )

    http_event, grpc_event = events
    assert shape(http_event) == shape(grpc_event)
    assert http_event.event_id != grpc_event.event_id
    assert grpc_event.tenant == "acme" and grpc_event.key_id is not None


def httpx_client(world: GrpcWorld, headers: dict[str, str]):  # type: ignore[no-untyped-def]
    import httpx

    return httpx.Client(base_url=world.http, headers=headers)


def test_the_admin_key_header_is_the_same_as_http(grpc_world: GrpcWorld) -> None:
    """``authorization`` metadata carries what HTTP's header does (case of the scheme
    aside)."""
    grpc_world.publisher.adder()
    upper = {"authorization": AUTH["Authorization"].replace("Bearer", "BEARER")}
    result = grpc_world.client.infer("acme/adder", [x_input()], headers=upper)
    np.testing.assert_array_equal(result.as_numpy("y"), X + 1)


def test_a_gateway_serves_grpc_and_refuses_what_it_cannot_run(make_v2) -> None:  # type: ignore[no-untyped-def]
    """A gateway has no model host: the surface runs, and a call of a local version gets
    the gateway's refusal as UNAVAILABLE with its code."""
    from modelport.config import Role
    from tests.conftest import LiveServer
    from tests.isolation import free_port

    port = free_port()
    _, services, publisher = make_v2(lifespan=False, grpc_port=port, role=Role.GATEWAY)
    server = LiveServer(services).start()
    client = triton.InferenceServerClient(f"127.0.0.1:{port}")
    try:
        publisher.adder()
        assert client.is_server_live() and client.is_server_ready()
        metadata = client.get_model_metadata("acme/adder", headers=ADMIN, as_json=True)
        assert metadata["name"] == "acme/adder"
        status, code = refusal(lambda: client.infer("acme/adder", [x_input()], headers=ADMIN))
        assert (status, code) == ("StatusCode.UNAVAILABLE", "role_lacks_service")
    finally:
        client.close()
        server.stop()


def test_loads_unloads_and_forbidden_calls_are_audited_as_on_http(grpc_world: GrpcWorld) -> None:
    from modelport.tenancy.types import AuditQuery

    client, publisher, services = grpc_world.client, grpc_world.publisher, grpc_world.services
    publisher.adder()
    member = key(consumer_key(services, "acme"))
    client.load_model("acme/adder", headers={**ADMIN, "x-request-id": "load-1"})
    client.unload_model("acme/adder", headers=ADMIN)
    refusal(lambda: client.load_model("acme/adder", headers=member))
    refusal(lambda: client.load_model("acme/adder"))  # nobody to attribute it to
    events = services.tenancy.audit_log(AuditQuery(tenant="acme", limit=10)).items
    found = sorted(
        (e.action, e.outcome, e.status, e.actor, e.request_id)
        for e in events
        if e.action.startswith("grpc.")
    )
    assert found[0] == ("grpc.RepositoryModelLoad", "denied", 403, "acme/app", found[0][4])
    assert found[1:] == [
        ("grpc.RepositoryModelLoad", "success", 200, "admin", "load-1"),
        ("grpc.RepositoryModelUnload", "success", 200, "admin", found[2][4]),
    ]
    targets = {e.target for e in events if e.action.startswith("grpc.")}
    assert targets == {
        "/inference.GRPCInferenceService/RepositoryModelLoad",
        "/inference.GRPCInferenceService/RepositoryModelUnload",
    }
