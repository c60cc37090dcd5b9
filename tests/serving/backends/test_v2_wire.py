"""The client codec against the server codec: what one encodes the other decodes."""

from __future__ import annotations

import numpy as np
import orjson
import pytest

from modelport.api.v2.codec import encode_infer_response, parse_infer_request
from modelport.api.v2.types import INFERENCE_HEADER, RequestOutput
from modelport.serving.backends import v2_wire


def test_a_request_the_server_codec_parses_back() -> None:
    inputs = {
        "x": np.arange(8, dtype=np.float32).reshape(2, 4),
        "ids": np.array([[1, -2]], dtype=np.int64),
        "text": np.array([b"hello", "w\u00f6rld".encode()], dtype=object),
        "flag": np.array([True, False]),
    }
    body, headers = v2_wire.encode_request(
        inputs, outputs=["y"], parameters={"temperature": 0.5}, request_id="r-1"
    )
    parsed = parse_infer_request(body, headers[INFERENCE_HEADER])
    assert parsed.id == "r-1"
    assert parsed.binary_data_output is True
    assert parsed.parameters == {"temperature": 0.5}
    assert parsed.output_names() == ["y"]
    arrays = parsed.arrays()
    for name, array in inputs.items():
        np.testing.assert_array_equal(arrays[name], array)
    assert arrays["text"].tolist() == [b"hello", "w\u00f6rld".encode()]


@pytest.mark.parametrize("binary", [True, False])
def test_a_response_the_server_codec_encodes_decodes(binary: bool) -> None:
    outputs = {
        "y": np.array([[1.5, float("nan"), float("inf"), float("-inf")]], dtype=np.float32),
        "label": np.array([b"cat", b"dog"], dtype=object),
        "count": np.array([3], dtype=np.uint16),
    }
    encoded = encode_infer_response(
        outputs,
        model_name="acme/m",
        requested=[RequestOutput(name) for name in outputs],
        binary_data_output=binary,
    )
    decoded = v2_wire.decode_response(encoded.body, encoded.headers.get(INFERENCE_HEADER))
    # NaN and infinities survive both ways (as NaN/Infinity literals in JSON).
    np.testing.assert_array_equal(decoded["y"], outputs["y"])
    assert decoded["y"].dtype == np.float32
    assert decoded["label"].tolist() == [b"cat", b"dog"]
    assert decoded["count"].dtype == np.uint16


@pytest.mark.parametrize(
    ("body", "header", "problem"),
    [
        (b"not json", None, "not JSON"),
        (b'{"model_name": "m"}', None, "no 'outputs'"),
        (b'{"outputs": [{"name": "y", "datatype": "FP32", "shape": [-1]}]}', None, "bad shape"),
        (
            b'{"outputs": [{"name": "y", "datatype": "FP32", "shape": [2], "data": [1]}]}',
            None,
            "output 'y'",
        ),
        (
            b'{"outputs": [{"name": "y", "datatype": "FP32", "shape": [1],'
            b' "parameters": {"binary_data_size": 4}}]}',
            None,
            "binary_data_size",
        ),
        (b"{}", "99", INFERENCE_HEADER),
    ],
)
def test_malformed_responses_are_named(body: bytes, header: str | None, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        v2_wire.decode_response(body, header)


def test_error_message() -> None:
    assert v2_wire.error_message(orjson.dumps({"error": "bad input 'x'"})) == "bad input 'x'"
    assert v2_wire.error_message(b"<html>502</html>") == "<html>502</html>"
