"""The official tritonclient HTTP client against a live modelport server."""

from __future__ import annotations

import numpy as np
import pytest
import tritonclient.http as triton
from tritonclient.utils import InferenceServerException

from tests.api_v2.conftest import AUTH


def key() -> dict[str, str]:
    # A fresh dict per call: tritonclient adds its own headers to the dict it is given.
    return dict(AUTH)


@pytest.fixture
def triton_client(live_v2):
    url, publisher = live_v2
    client = triton.InferenceServerClient(url=url.removeprefix("http://"))
    yield client, publisher
    client.close()


def test_health_metadata_load_infer_unload(triton_client) -> None:
    client, publisher = triton_client
    publisher.adder("acme/fraud-risk", version="3")
    assert client.is_server_live()
    assert client.is_server_ready()
    server = client.get_server_metadata(headers=key())
    assert server["name"] == "modelport"
    assert "binary_tensor_data" in server["extensions"]

    assert not client.is_model_ready("acme/fraud-risk", "3", headers=key())
    client.load_model("acme/fraud-risk", headers=key())
    assert client.is_model_ready("acme/fraud-risk", "3", headers=key())
    assert client.is_model_ready("acme/fraud-risk", headers=key())
    metadata = client.get_model_metadata("acme/fraud-risk", "3", headers=key())
    assert metadata["inputs"] == [{"name": "x", "datatype": "FP32", "shape": [-1, 4]}]
    index = client.get_model_repository_index(headers=key())
    assert index == [{"name": "acme/fraud-risk", "version": "3", "state": "READY", "reason": ""}]

    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    for binary in (False, True):
        tensor = triton.InferInput("x", [3, 4], "FP32")
        tensor.set_data_from_numpy(x, binary_data=binary)
        wanted = triton.InferRequestedOutput("y", binary_data=binary)
        result = client.infer(
            "acme/fraud-risk",
            [tensor],
            model_version="3",
            outputs=[wanted],
            headers=key(),
            request_id=f"r-{binary}",
        )
        np.testing.assert_array_equal(result.as_numpy("y"), x + 1)
        response = result.get_response()
        assert response["model_version"] == "3" and response["id"] == f"r-{binary}"

    # Triton's timeout parameter (microseconds) and priority levels are understood.
    tensor = triton.InferInput("x", [3, 4], "FP32")
    tensor.set_data_from_numpy(x)
    result = client.infer("acme/fraud-risk", [tensor], headers=key(), timeout=5_000_000, priority=2)
    np.testing.assert_array_equal(result.as_numpy("y"), x + 1)
    # Level 3 and above: the offline class.
    result = client.infer("acme/fraud-risk", [tensor], headers=key(), priority=3)
    np.testing.assert_array_equal(result.as_numpy("y"), x + 1)
    queued = publisher.services.metrics.registry.get_sample_value(
        "modelport_inference_queued_requests_total",
        {"model": "acme/fraud-risk", "version": "3", "priority": "offline"},
    )
    assert queued == 1

    client.unload_model("acme/fraud-risk", headers=key())
    assert not client.is_model_ready("acme/fraud-risk", "3", headers=key())


def test_errors_reach_the_client_with_the_server_message(triton_client) -> None:
    client, publisher = triton_client
    publisher.adder()
    tensor = triton.InferInput("x", [1, 3], "FP32")
    tensor.set_data_from_numpy(np.zeros((1, 3), np.float32))
    with pytest.raises(InferenceServerException) as info:
        client.infer("acme/adder", [tensor], headers=key())
    assert "expected shape [-1, 4]" in info.value.message()
    with pytest.raises(InferenceServerException) as missing:
        client.get_model_metadata("acme/missing", headers=key())
    assert missing.value.status() == "404"
    with pytest.raises(InferenceServerException):
        client.get_server_metadata()  # no key


def test_nan_and_infinities_round_trip_through_json_as_with_triton(triton_client) -> None:
    """Triton reads and writes NaN, Infinity and -Infinity literals in JSON tensors;
    so does modelport, so a float output never turns into null."""
    client, publisher = triton_client
    publisher.adder()
    x = np.array([[np.nan, np.inf, -np.inf, 1.5]], dtype=np.float32)
    tensor = triton.InferInput("x", [1, 4], "FP32")
    tensor.set_data_from_numpy(x, binary_data=False)
    result = client.infer(
        "acme/adder",
        [tensor],
        outputs=[triton.InferRequestedOutput("y", binary_data=False)],
        headers=key(),
    )
    y = result.as_numpy("y")
    assert y is not None and y.dtype == np.float32
    np.testing.assert_array_equal(y, x + 1)  # NaN compares equal to NaN here
    assert "parameters" not in result.get_output("y")  # it went as JSON, not binary


def test_model_config_as_triton_answers_it(triton_client) -> None:
    client, publisher = triton_client
    publisher.adder("acme/fraud-risk", version="3", resources={"max_batch_size": 16})
    config = client.get_model_config("acme/fraud-risk", "3", headers=key())
    assert config == {
        "name": "acme/fraud-risk",
        "platform": "onnxruntime_onnx",
        "backend": "onnxruntime",
        "max_batch_size": 16,  # every first dimension is -1: the batch, left out of dims
        "input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [4]}],
        "output": [{"name": "y", "data_type": "TYPE_FP32", "dims": [4]}],
    }
    assert client.get_model_config("acme/fraud-risk", headers=key()) == config
    with pytest.raises(InferenceServerException) as missing:
        client.get_model_config("acme/fraud-risk", "9", headers=key())
    assert missing.value.status() == "404"


def test_statistics_count_calls_and_failures_as_triton_does(triton_client) -> None:
    client, publisher = triton_client
    publisher.adder("acme/fraud-risk", version="3")

    def stats() -> dict:
        (found,) = client.get_inference_statistics("acme/fraud-risk", "3", headers=key())[
            "model_stats"
        ]
        return found

    before = stats()
    assert before["name"] == "acme/fraud-risk" and before["version"] == "3"
    assert before["inference_count"] == 0 and before["last_inference"] == 0
    assert before["inference_stats"]["success"] == {"count": 0, "ns": 0}

    for rows in (3, 1):
        tensor = triton.InferInput("x", [rows, 4], "FP32")
        tensor.set_data_from_numpy(np.ones((rows, 4), np.float32))
        client.infer("acme/fraud-risk", [tensor], model_version="3", headers=key())
    wrong = triton.InferInput("x", [1, 3], "FP32")
    wrong.set_data_from_numpy(np.zeros((1, 3), np.float32))
    with pytest.raises(InferenceServerException):
        client.infer("acme/fraud-risk", [wrong], model_version="3", headers=key())

    after = stats()
    inference = after["inference_stats"]
    assert after["inference_count"] == 4  # rows, as Triton counts a batch
    assert 1 <= after["execution_count"] <= 2  # the two calls may share a batch
    assert inference["success"]["count"] == 2 and inference["success"]["ns"] > 0
    assert inference["fail"]["count"] == 1
    assert inference["queue"]["count"] == 2
    assert inference["compute_infer"]["count"] == after["execution_count"]
    assert inference["compute_infer"]["ns"] > 0
    assert after["last_inference"] > 0
    # Without a version: every version observed; all models: this one among them.
    model = client.get_inference_statistics("acme/fraud-risk", headers=key())["model_stats"]
    assert model == [after]
    everything = client.get_inference_statistics(headers=key())["model_stats"]
    assert [(s["name"], s["version"]) for s in everything] == [("acme/fraud-risk", "3")]


def test_config_and_statistics_are_hidden_as_the_metadata_is(triton_client) -> None:
    client, publisher = triton_client
    publisher.adder("acme/fraud-risk", version="3")
    tensor = triton.InferInput("x", [1, 4], "FP32")
    tensor.set_data_from_numpy(np.ones((1, 4), np.float32))
    client.infer("acme/fraud-risk", [tensor], headers=key())
    tenancy = publisher.services.tenancy
    tenancy.create_tenant("globex", actor="admin")
    tenancy.add_member("globex", "gail", roles=["consumer"], actor="admin")
    issued = tenancy.create_key("globex", "gail", name="t", actor="admin")
    other = {"Authorization": f"Bearer {issued.secret}"}
    for call in (
        lambda: client.get_model_metadata("acme/fraud-risk", headers=dict(other)),
        lambda: client.get_model_config("acme/fraud-risk", headers=dict(other)),
        lambda: client.get_inference_statistics("acme/fraud-risk", headers=dict(other)),
    ):
        with pytest.raises(InferenceServerException) as hidden:
            call()
        assert hidden.value.status() == "404"
    assert client.get_inference_statistics(headers=dict(other)) == {"model_stats": []}
    with pytest.raises(InferenceServerException) as anonymous:
        client.get_model_config("acme/fraud-risk")
    assert anonymous.value.status() == "401"
