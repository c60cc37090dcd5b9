"""The gRPC codec and refusal mapper, pure: messages in and out, each malformed request
refused with the REST codec's stable code, each error kind a gRPC status."""

from __future__ import annotations

from typing import Any

import grpc
import numpy as np
import pytest

from modelport import errors
from modelport.api.grpc import oip_pb2 as pb
from modelport.api.grpc.codec import encode_infer_response, parse_infer_request, text_response
from modelport.api.grpc.status import STATUS_OF_KIND, message_of, status_of, trailers_of
from modelport.api.v2.types import RequestOutput
from modelport.errors import Internal, InvalidInput, ModelportError
from modelport.manifest import TensorSpec


def request(*tensors: dict[str, Any], raw: list[bytes] | None = None) -> pb.ModelInferRequest:
    made = pb.ModelInferRequest(model_name="acme/m")
    for tensor in tensors:
        contents = tensor.pop("contents", None)
        added = made.inputs.add(**tensor)
        if contents is not None:
            field, values = contents
            getattr(added.contents, field).extend(values)
    made.raw_input_contents.extend(raw or [])
    return made


def test_raw_contents_are_numpy_views_and_typed_contents_arrays() -> None:
    x = np.arange(6, dtype="<f4").reshape(2, 3)
    parsed = parse_infer_request(
        request(
            {"name": "x", "datatype": "FP32", "shape": [2, 3]},
            {"name": "t", "datatype": "BYTES", "shape": [2]},
            raw=[x.tobytes(), b"\x01\x00\x00\x00a\x00\x00\x00\x00"],
        )
    )
    arrays = parsed.arrays()
    np.testing.assert_array_equal(arrays["x"], x)
    assert arrays["t"].tolist() == [b"a", b""]
    typed = parse_infer_request(
        request(
            {
                "name": "i",
                "datatype": "INT8",
                "shape": [3],
                "contents": ("int_contents", [-1, 0, 7]),
            },
            {"name": "b", "datatype": "BOOL", "shape": [1], "contents": ("bool_contents", [True])},
        )
    ).arrays()
    assert typed["i"].dtype == np.int8 and typed["i"].tolist() == [-1, 0, 7]
    assert typed["b"].dtype == np.bool_ and typed["b"].tolist() == [True]


@pytest.mark.parametrize(
    ("tensors", "raw", "code"),
    [
        ([], None, "invalid_request"),
        ([{"name": "x", "datatype": "FP32", "shape": [0]}] * 2, None, "duplicate_input"),
        ([{"name": "x", "datatype": "FP8", "shape": [1]}], None, "invalid_datatype"),
        ([{"name": "x", "datatype": "FP32", "shape": [-1]}], None, "invalid_tensor_shape"),
        ([{"name": "x", "datatype": "FP32", "shape": [1 << 30]}], None, "tensor_too_large"),
        ([{"name": "x", "datatype": "FP32", "shape": [2]}], [b"\x00" * 4], "invalid_binary_data"),
        (
            [{"name": "x", "datatype": "FP32", "shape": [1]}, {"name": "y", "datatype": "FP32"}],
            [b"\x00" * 4],
            "invalid_binary_data",
        ),
        (
            [{"name": "x", "datatype": "FP32", "shape": [3], "contents": ("fp32_contents", [1])}],
            None,
            "invalid_tensor_data",
        ),
        (
            [
                {
                    "name": "x",
                    "datatype": "UINT8",
                    "shape": [1],
                    "contents": ("uint_contents", [300]),
                }
            ],
            None,
            "invalid_tensor_data",
        ),
        ([{"name": "x", "datatype": "FP16", "shape": [1]}], None, "invalid_tensor_data"),
        (
            [{"name": "x", "datatype": "FP32", "shape": [1], "contents": ("fp32_contents", [1])}],
            [b"\x00" * 4],
            "invalid_tensor_data",
        ),
    ],
    ids=[
        "no-inputs",
        "duplicate",
        "datatype",
        "negative-dim",
        "too-large",
        "raw-short",
        "raw-count",
        "contents-count",
        "overflow",
        "fp16-typed",
        "both",
    ],
)
def test_malformed_requests_are_refused_with_stable_codes(
    tensors: list[dict[str, Any]], raw: list[bytes] | None, code: str
) -> None:
    with pytest.raises(InvalidInput) as refused:
        parse_infer_request(request(*(dict(t) for t in tensors), raw=raw), max_elements=1 << 20)
    assert refused.value.code == code


def test_outputs_shared_memory_and_duplicates_are_refused() -> None:
    made = request({"name": "x", "datatype": "FP32", "shape": [1]}, raw=[b"\x00" * 4])
    made.outputs.add(name="y").parameters["shared_memory_region"].string_param = "r"
    with pytest.raises(InvalidInput) as refused:
        parse_infer_request(made)
    assert refused.value.code == "unsupported_parameter"
    made = request({"name": "x", "datatype": "FP32", "shape": [1]}, raw=[b"\x00" * 4])
    made.outputs.add(name="y")
    made.outputs.add(name="y")
    with pytest.raises(InvalidInput) as refused:
        parse_infer_request(made)
    assert refused.value.code == "duplicate_output"


def test_responses_carry_raw_outputs_in_their_declared_datatype() -> None:
    declared = [
        TensorSpec(name="y", datatype="FP32", shape=[-1]),
        TensorSpec(name="t", datatype="BYTES", shape=[-1]),
    ]
    y = np.array([1.5, 2.5], dtype=np.float32)
    answer = encode_infer_response(
        {"y": y, "t": np.array(["é"], dtype=object)},
        model_name="acme/m",
        model_version="1",
        request_id="r",
        requested=(),
        declared=declared,
    )
    assert [(o.name, o.datatype, list(o.shape)) for o in answer.outputs] == [
        ("y", "FP32", [2]),
        ("t", "BYTES", [1]),
    ]
    assert answer.raw_output_contents[0] == y.tobytes()
    assert answer.raw_output_contents[1] == b"\x02\x00\x00\x00" + "é".encode()
    only = encode_infer_response(
        {"y": y, "t": np.array(["a"], dtype=object)},
        model_name="acme/m",
        model_version="1",
        request_id=None,
        requested=(RequestOutput(name="t"),),
        declared=declared,
    )
    assert [o.name for o in only.outputs] == ["t"] and only.id == ""
    with pytest.raises(Internal) as wrong:
        encode_infer_response(
            {"y": y.astype(np.float64), "t": np.array(["a"], dtype=object)},
            model_name="acme/m",
            model_version="1",
            request_id=None,
            requested=(),
            declared=declared,
        )
    assert wrong.value.code == "output_datatype_mismatch"
    with pytest.raises(Internal) as missing:
        encode_infer_response(
            {"y": y},
            model_name="m",
            model_version="1",
            request_id=None,
            requested=(),
            declared=declared,
        )
    assert missing.value.code == "missing_output"


def test_a_stream_chunk_and_its_final_response() -> None:
    chunk = text_response(
        " fox",
        model_name="m",
        model_version="1",
        request_id="r",
        parameters={"triton_final_response": False},
    )
    assert [o.name for o in chunk.outputs] == ["text_output"]
    assert chunk.raw_output_contents[0] == b"\x04\x00\x00\x00 fox"
    final = text_response(
        "",
        model_name="m",
        model_version="1",
        request_id="r",
        parameters={"triton_final_response": True, "output_tokens": 4, "finish_reason": "stop"},
    )
    assert not final.outputs
    assert final.parameters["triton_final_response"].bool_param is True
    assert final.parameters["output_tokens"].int64_param == 4
    assert final.parameters["finish_reason"].string_param == "stop"


def test_every_error_kind_has_a_status_and_the_code_travels_twice() -> None:
    kinds = {
        cls.kind
        for cls in vars(errors).values()
        if isinstance(cls, type) and issubclass(cls, ModelportError)
    }
    assert kinds <= set(STATUS_OF_KIND)
    limited = errors.Overloaded("slow down", code="rate_limited", retry_after=1.4)
    assert status_of(limited) is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert message_of(limited) == "rate_limited: slow down"
    assert trailers_of(limited) == (("modelport-error-code", "rate_limited"), ("retry-after", "1"))
    missing = errors.NotFound("no such model", code="model_not_found")
    assert status_of(missing) is grpc.StatusCode.NOT_FOUND
    assert trailers_of(missing) == (("modelport-error-code", "model_not_found"),)
