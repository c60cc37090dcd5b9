"""The v2 codec against the official tritonclient HTTP client's own encoder and decoder."""

from __future__ import annotations

import math
import struct
from typing import Any

import numpy as np
import orjson
import pytest
import tritonclient.http as triton
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from modelport.api.v2 import (
    INFERENCE_HEADER,
    InferenceRequest,
    RequestOutput,
    encode_infer_response,
    parse_infer_request,
)
from modelport.errors import Internal, InvalidInput

NUMERIC = {
    "BOOL": np.bool_,
    "UINT8": np.uint8,
    "UINT16": np.uint16,
    "UINT32": np.uint32,
    "UINT64": np.uint64,
    "INT8": np.int8,
    "INT16": np.int16,
    "INT32": np.int32,
    "INT64": np.int64,
    "FP16": np.float16,
    "FP32": np.float32,
    "FP64": np.float64,
}
ALL_DATATYPES = [*NUMERIC, "BYTES"]


def sample(datatype: str, shape: tuple[int, ...] = (2, 3)) -> np.ndarray:
    """Values that exercise each type's edges (extremes, negatives, non-ASCII)."""
    count = math.prod(shape)
    if datatype == "BYTES":
        words = [b"", b"a", "h\u00e9llo".encode(), b"x" * 300, "\u6f22".encode(), b"tab\tnl\n"]
        return np.array([words[i % len(words)] for i in range(count)], dtype=object).reshape(shape)
    dtype = np.dtype(NUMERIC[datatype])
    if datatype == "BOOL":
        return (np.arange(count) % 3 == 0).reshape(shape)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        values = [info.min, info.max, 0, 1, info.max // 3, info.min // 2 if info.min else 7]
    else:
        info = np.finfo(dtype)
        values = [float(info.max), float(info.tiny), -0.0, -1.5, 0.1, float(info.min)]
    return np.array([values[i % len(values)] for i in range(count)], dtype=dtype).reshape(shape)


def triton_body(
    inputs: list[tuple[str, np.ndarray, str, bool]],
    outputs: list[triton.InferRequestedOutput] | None = None,
    **kwargs: Any,
) -> tuple[bytes, int | None]:
    tensors = []
    for name, array, datatype, binary in inputs:
        tensor = triton.InferInput(name, list(array.shape), datatype)
        tensor.set_data_from_numpy(array, binary_data=binary)
        tensors.append(tensor)
    return triton.InferenceServerClient.generate_request_body(tensors, outputs, **kwargs)


def triton_result(body: bytes, headers: dict[str, str]) -> triton.InferResult:
    length = headers.get(INFERENCE_HEADER)
    return triton.InferResult.from_response_body(
        body, header_length=None if length is None else int(length)
    )


def same(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal dtype, shape and bits (so NaN equals NaN and -0.0 differs from 0.0)."""
    if a.dtype == object or b.dtype == object:
        return a.shape == b.shape and a.tolist() == b.tolist()
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def canonical_nan(array: np.ndarray) -> np.ndarray:
    if array.dtype.kind != "f":
        return array
    return np.where(np.isnan(array), np.array(np.nan, dtype=array.dtype), array)


def parse_json(doc: dict[str, Any], **kwargs: Any) -> InferenceRequest:
    return parse_infer_request(orjson.dumps(doc), None, **kwargs)


def one_input(**fields: Any) -> dict[str, Any]:
    tensor = {"name": "x", "datatype": "FP32", "shape": [2], "data": [1.0, 2.0]}
    tensor.update(fields)
    return {"inputs": [tensor]}


class TestRequestsFromTritonClient:
    @pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
    @pytest.mark.parametrize("datatype", ALL_DATATYPES)
    def test_every_datatype(self, datatype: str, binary: bool) -> None:
        array = sample(datatype)
        body, header = triton_body([("x", array, datatype, binary)])
        request = parse_infer_request(body, header)
        (tensor,) = request.inputs
        assert (tensor.name, tensor.datatype, tensor.shape) == ("x", datatype, (2, 3))
        assert same(tensor.data, array)
        if datatype == "BYTES":
            assert tensor.nbytes == sum(len(v) for v in array.reshape(-1))
        else:
            assert tensor.nbytes == array.nbytes
        assert "binary_data_size" not in tensor.parameters
        assert (header is not None) is binary

    def test_mixed_binary_and_json_inputs_are_sliced_in_order(self) -> None:
        a = sample("FP32", (3, 1))
        b = sample("BYTES", (4,))
        c = sample("INT16", (2, 2))
        d = sample("BOOL", (5,))
        body, header = triton_body(
            [
                ("a", a, "FP32", True),
                ("b", b, "BYTES", True),
                ("c", c, "INT16", False),
                ("d", d, "BOOL", True),
            ]
        )
        request = parse_infer_request(body, str(header))
        arrays = request.arrays()
        assert list(arrays) == ["a", "b", "c", "d"]
        for name, want in zip("abcd", (a, b, c, d), strict=True):
            assert same(arrays[name], want)

    def test_requested_outputs_id_and_parameters(self) -> None:
        body, header = triton_body(
            [("x", sample("FP32"), "FP32", True)],
            [triton.InferRequestedOutput("y"), triton.InferRequestedOutput("z", False)],
            request_id="req-1",
            priority=2,
            parameters={"temperature": 0.5, "tag": "t"},
        )
        request = parse_infer_request(body, header)
        assert request.id == "req-1"
        assert request.parameters == {"priority": 2, "temperature": 0.5, "tag": "t"}
        assert request.outputs == (
            RequestOutput("y", binary_data=True),
            RequestOutput("z", binary_data=False),
        )
        assert request.output_names() == ["y", "z"]
        assert request.binary_data_output is False

    def test_no_requested_outputs_asks_for_all_in_binary(self) -> None:
        body, header = triton_body([("x", sample("FP32"), "FP32", False)])
        request = parse_infer_request(body, header)
        assert request.outputs == ()
        assert request.output_names() is None
        assert request.binary_data_output is True
        assert request.parameters == {}

    def test_binary_inputs_are_read_only_views(self) -> None:
        body, header = triton_body([("x", sample("FP64"), "FP64", True)])
        (tensor,) = parse_infer_request(body, header).inputs
        assert not tensor.data.flags.writeable

    def test_non_finite_json_floats_as_written_by_rapidjson(self) -> None:
        array = np.array([np.nan, np.inf, -np.inf, 1.0], dtype=np.float32)
        body, header = triton_body([("x", array, "FP32", False)])
        assert b"NaN" in body
        (tensor,) = parse_infer_request(body, header).inputs
        assert same(tensor.data, array)

    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(data=st.data())
    def test_property_any_tensor_round_trips(self, data: st.DataObject) -> None:
        datatype = data.draw(st.sampled_from(ALL_DATATYPES), label="datatype")
        shape = data.draw(hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=4))
        binary = data.draw(st.booleans(), label="binary")
        if datatype == "BYTES":
            # JSON carries text only: tritonclient refuses non-UTF-8 there.
            text = st.text(st.characters(exclude_categories=["Cs"]), max_size=8).map(str.encode)
            elements = st.binary(max_size=12) if binary else text
            array = data.draw(hnp.arrays(object, shape, elements=elements))
        else:
            array = data.draw(hnp.arrays(np.dtype(NUMERIC[datatype]), shape))
        body, header = triton_body([("t", array, datatype, binary)])
        (tensor,) = parse_infer_request(body, header).inputs
        if binary:
            assert same(tensor.data, array)
        else:  # JSON has one NaN: payload bits are not carried
            assert same(canonical_nan(tensor.data), canonical_nan(array))


class TestResponsesForTritonClient:
    @pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
    @pytest.mark.parametrize("datatype", ALL_DATATYPES)
    def test_every_datatype(self, datatype: str, binary: bool) -> None:
        array = sample(datatype)
        body, headers = encode_infer_response(
            {"y": array},
            model_name="m",
            model_version="3",
            request_id="r",
            requested=[RequestOutput("y", binary_data=binary)],
        )
        result = triton_result(body, headers)
        got = result.as_numpy("y")
        if datatype == "BYTES" and not binary:
            # JSON carries text; tritonclient hands back str objects.
            assert got.tolist() == [[v.decode() for v in row] for row in array.tolist()]
        else:
            assert same(got, array)
        response = result.get_response()
        assert (response["model_name"], response["model_version"], response["id"]) == (
            "m",
            "3",
            "r",
        )
        assert response["outputs"][0]["datatype"] == datatype
        if binary:
            assert headers["Content-Type"] == "application/octet-stream"
            assert int(headers[INFERENCE_HEADER]) < len(body)
        else:
            assert headers == {"Content-Type": "application/json"}

    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(data=st.data())
    def test_property_any_output_round_trips(self, data: st.DataObject) -> None:
        datatype = data.draw(st.sampled_from(ALL_DATATYPES), label="datatype")
        shape = data.draw(hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=4))
        binary = data.draw(st.booleans(), label="binary")
        if datatype == "BYTES":
            array = data.draw(hnp.arrays(object, shape, elements=st.binary(max_size=12)))
        else:
            array = data.draw(hnp.arrays(np.dtype(NUMERIC[datatype]), shape))
        body, headers = encode_infer_response(
            {"y": array}, model_name="m", binary_data_output=binary
        )
        result = triton_result(body, headers)
        got = result.as_numpy("y")
        sent_binary = "parameters" in result.get_output("y")
        if datatype == "BYTES" and not binary:
            # Text goes as JSON (read back as str); non-UTF-8 bytes fall back to binary.
            texts = [v.decode() for v in array.reshape(-1).tolist()] if not sent_binary else None
            assert got.reshape(-1).tolist() == (texts or array.reshape(-1).tolist())
        elif datatype[:2] == "FP" and not binary:
            # JSON has one NaN (payload bits are not carried); infinities round-trip.
            assert not sent_binary
            assert same(canonical_nan(got), canonical_nan(array))
        else:
            assert sent_binary == binary
            assert same(got, array)

    def test_selection_order_and_binary_defaults(self) -> None:
        outputs = {"a": sample("FP32"), "b": sample("INT64"), "c": sample("BYTES")}
        body, headers = encode_infer_response(
            outputs,
            model_name="m",
            requested=[RequestOutput("c"), RequestOutput("a", binary_data=False)],
            binary_data_output=True,
        )
        result = triton_result(body, headers)
        doc = result.get_response()
        assert [o["name"] for o in doc["outputs"]] == ["c", "a"]
        assert "data" not in doc["outputs"][0] and "data" in doc["outputs"][1]
        assert "model_version" not in doc and "id" not in doc
        assert same(result.as_numpy("c"), outputs["c"])
        assert same(result.as_numpy("a"), outputs["a"])

    def test_all_outputs_when_none_requested(self) -> None:
        outputs = {"a": sample("UINT8"), "b": sample("FP16")}
        body, headers = encode_infer_response(outputs, model_name="m", binary_data_output=True)
        result = triton_result(body, headers)
        assert [o["name"] for o in result.get_response()["outputs"]] == ["a", "b"]
        for name, array in outputs.items():
            assert same(result.as_numpy(name), array)

    def test_json_floats_are_shortest_and_non_finite_ones_are_literals(self) -> None:
        for dtype in (np.float16, np.float32, np.float64):
            array = np.array([[0.1, np.nan], [np.inf, -np.inf]], dtype=dtype)
            body, _ = encode_infer_response({"y": array}, model_name="m")
            assert b"[0.1,NaN,Infinity,-Infinity]" in body.replace(b"0.099975586", b"0.1")
            # Read back as Triton's clients and modelport's own parser read it.
            data = triton_result(body, {}).as_numpy("y")
            assert same(canonical_nan(data), canonical_nan(array))
        finite, _ = encode_infer_response({"y": np.array([0.1], np.float32)}, model_name="m")
        assert orjson.loads(finite)["outputs"][0]["data"] == [0.1]

    def test_non_utf8_bytes_fall_back_to_binary(self) -> None:
        array = np.array([b"ok", b"\xff\xfe"], dtype=object)
        body, headers = encode_infer_response({"y": array}, model_name="m")
        result = triton_result(body, headers)
        assert result.get_response()["outputs"][0]["parameters"] == {
            "binary_data_size": 4 + 2 + 4 + 2
        }
        assert result.as_numpy("y").tolist() == [b"ok", b"\xff\xfe"]

    def test_str_and_fixed_width_numpy_strings(self) -> None:
        for array in (np.array(["a", "\u00e9"]), np.array([b"a", b"bc"])):
            for binary in (True, False):
                body, headers = encode_infer_response(
                    {"y": array}, model_name="m", binary_data_output=binary
                )
                got = triton_result(body, headers).as_numpy("y").tolist()
                assert [v if isinstance(v, str) else v.decode() for v in got] == [
                    v if isinstance(v, str) else v.decode() for v in array.tolist()
                ]

    def test_big_endian_and_non_contiguous_arrays(self) -> None:
        base = np.arange(12, dtype=">i4").reshape(3, 4)
        view = base[:, ::2]
        for binary in (True, False):
            body, headers = encode_infer_response(
                {"y": view}, model_name="m", binary_data_output=binary
            )
            got = triton_result(body, headers).as_numpy("y")
            assert got.tolist() == view.tolist() and got.dtype == np.int32

    def test_scalar_and_empty_outputs(self) -> None:
        outputs = {"s": np.float64(2.5), "e": np.zeros((0, 3), dtype=np.int8)}
        for binary in (True, False):
            body, headers = encode_infer_response(
                outputs, model_name="m", binary_data_output=binary
            )
            result = triton_result(body, headers)
            assert result.as_numpy("s").shape == () and float(result.as_numpy("s")) == 2.5
            assert result.as_numpy("e").shape == (0, 3)

    def test_response_parameters(self) -> None:
        body, _ = encode_infer_response(
            {"y": sample("INT8")}, model_name="m", parameters={"backend": "local"}
        )
        assert orjson.loads(body)["parameters"] == {"backend": "local"}

    def test_missing_output_is_internal(self) -> None:
        with pytest.raises(Internal) as err:
            encode_infer_response(
                {"y": sample("INT8")}, model_name="m", requested=[RequestOutput("z")]
            )
        assert err.value.code == "missing_output" and "'z'" in err.value.message

    def test_unsupported_output_dtype_is_internal(self) -> None:
        with pytest.raises(Internal) as err:
            encode_infer_response({"c": np.array([1j])}, model_name="m")
        assert err.value.code == "unsupported_output_dtype"


def binary_input(datatype: str, shape: list[int], raw: bytes, **extra: Any) -> tuple[bytes, int]:
    tensor = {
        "name": "x",
        "datatype": datatype,
        "shape": shape,
        "parameters": {"binary_data_size": len(raw), **extra},
    }
    header = orjson.dumps({"inputs": [tensor]})
    return header + raw, len(header)


def expect(code: str, fragment: str, body: bytes, header: Any = None, **kwargs: Any) -> None:
    with pytest.raises(InvalidInput) as err:
        parse_infer_request(body, header, **kwargs)
    assert err.value.code == code, err.value.message
    assert fragment in err.value.message, err.value.message


class TestHostileRequests:
    @pytest.mark.parametrize(
        ("body", "fragment"),
        [
            (b"", "not valid JSON"),
            (b"{", "not valid JSON"),
            (b"\xff\xfe", "not valid JSON"),
            (b'{"inputs": [' * 3 + b"NaN", "not valid JSON"),
            (b"[" * 5000 + b"]" * 5000, "not valid JSON"),
            (b"[NaN" + b"[" * 100_000, "not valid JSON"),
        ],
        ids=["empty", "truncated", "binary", "nan-truncated", "deep", "deep-nan"],
    )
    def test_invalid_json(self, body: bytes, fragment: str) -> None:
        expect("invalid_json", fragment, body)

    @pytest.mark.parametrize(
        ("doc", "fragment"),
        [
            ([1, 2], "JSON object"),
            ({}, "non-empty 'inputs'"),
            ({"inputs": []}, "non-empty 'inputs'"),
            ({"inputs": {"x": 1}}, "non-empty 'inputs'"),
            ({"inputs": [3]}, "inputs[0] must be an object"),
            ({"inputs": [{"datatype": "FP32", "shape": [1], "data": [1]}]}, "inputs[0] needs"),
            ({**one_input(), "id": 7}, "'id' must be a string"),
            ({**one_input(), "parameters": [1]}, "request: 'parameters'"),
            ({**one_input(), "parameters": {"binary_data_output": 1}}, "binary_data_output"),
            ({**one_input(), "outputs": {"name": "y"}}, "'outputs' must be an array"),
            ({**one_input(), "outputs": [{"name": 5}]}, "outputs[0] needs"),
            (
                {**one_input(), "outputs": [{"name": "y", "parameters": {"binary_data": "yes"}}]},
                "output 'y': binary_data",
            ),
        ],
    )
    def test_malformed_structure(self, doc: Any, fragment: str) -> None:
        expect("invalid_request", fragment, orjson.dumps(doc))

    @pytest.mark.parametrize(
        "value", ["abc", "-1", "1e3", "+5", "1_0", "\u0661\u0662", "", 3.0, True]
    )
    def test_bad_header_length(self, value: Any) -> None:
        expect("invalid_header_length", INFERENCE_HEADER, orjson.dumps(one_input()), value)

    def test_header_length_beyond_body(self) -> None:
        body = orjson.dumps(one_input())
        expect("invalid_header_length", f"body is {len(body)} bytes", body, len(body) + 1)

    def test_header_length_with_whitespace_and_exact_body(self) -> None:
        body = orjson.dumps(one_input())
        assert parse_infer_request(body, f" {len(body)} ").inputs[0].name == "x"

    @pytest.mark.parametrize(
        ("shape", "code", "fragment"),
        [
            ([-1, 2], "invalid_tensor_shape", "negative dimension"),
            ([2.0], "invalid_tensor_shape", "must hold integers"),
            ([True], "invalid_tensor_shape", "must hold integers"),
            ("2", "invalid_tensor_shape", "'shape' must be an array"),
            (None, "invalid_tensor_shape", "'shape' must be an array"),
            ([1] * 33, "invalid_tensor_shape", "33 dimensions"),
            ([2**62, 2**62], "tensor_too_large", "dimension 4611686018427387904"),
            ([0, 2**63 - 1], "tensor_too_large", "dimension"),
            ([4096, 4096, 4096], "tensor_too_large", "68719476736 elements"),
        ],
    )
    def test_bad_shapes(self, shape: Any, code: str, fragment: str) -> None:
        expect(code, fragment, orjson.dumps(one_input(shape=shape)))
        body, header = binary_input("FP32", shape if isinstance(shape, list) else [1], b"")
        if isinstance(shape, list):
            expect(code, fragment, body, header)

    def test_integers_beyond_64_bits(self) -> None:
        # orjson reads integers beyond 64 bits as floats, so they fail the integer checks.
        big = b"18446744073709551616"
        body = b'{"inputs":[{"name":"x","datatype":"FP32","shape":[%s],"data":[]}]}' % big
        expect("invalid_tensor_shape", "must hold integers", body)
        body = b'{"inputs":[{"name":"x","datatype":"UINT64","shape":[1],"data":[%s]}]}' % big
        expect("invalid_tensor_data", "must be integers", body)

    def test_full_range_uint64_and_int64_json(self) -> None:
        values = [2**64 - 1, 0, 2**63]
        (tensor,) = parse_json(one_input(datatype="UINT64", shape=[3], data=values)).inputs
        assert tensor.data.dtype == np.uint64 and tensor.data.tolist() == values
        doc = one_input(datatype="INT64", shape=[2], data=[-(2**63), 2**63 - 1])
        assert parse_json(doc).inputs[0].data.tolist() == [-(2**63), 2**63 - 1]
        expect(
            "invalid_tensor_data",
            "out of range for INT64",
            orjson.dumps(one_input(datatype="INT64", shape=[2], data=[-1, 2**64 - 1])),
        )
        expect(
            "invalid_tensor_data",
            "must be integers",
            orjson.dumps(one_input(datatype="UINT64", shape=[2], data=[2**64 - 1, 0.5])),
        )

    def test_max_elements_counts_all_inputs_together(self) -> None:
        doc = {
            "inputs": [
                {"name": "a", "datatype": "INT8", "shape": [6], "data": [0] * 6},
                {"name": "b", "datatype": "INT8", "shape": [5], "data": [0] * 5},
            ]
        }
        assert len(parse_json(doc, max_elements=11).inputs) == 2
        expect("tensor_too_large", "input 'b'", orjson.dumps(doc), max_elements=10)

    def test_duplicate_names(self) -> None:
        doc = {"inputs": [one_input()["inputs"][0]] * 2}
        expect("duplicate_input", "input 'x'", orjson.dumps(doc))
        doc = {**one_input(), "outputs": [{"name": "y"}, {"name": "y"}]}
        expect("duplicate_output", "output 'y'", orjson.dumps(doc))

    @pytest.mark.parametrize("datatype", ["FP8", "BF16", "fp32", "", 5, None])
    def test_bad_datatype(self, datatype: Any) -> None:
        expect("invalid_datatype", "input 'x'", orjson.dumps(one_input(datatype=datatype)))

    @pytest.mark.parametrize(
        ("datatype", "shape", "data", "code", "fragment"),
        [
            ("INT32", [2], [1, 1.5], "invalid_tensor_data", "must be integers"),
            ("INT8", [2], [1, 300], "invalid_tensor_data", "out of range for INT8"),
            ("UINT8", [1], [-1], "invalid_tensor_data", "out of range for UINT8"),
            ("INT64", [1], [2**63], "invalid_tensor_data", "out of range for INT64"),
            ("BOOL", [2], [1, 0], "invalid_tensor_data", "must be true/false"),
            ("INT32", [2], [True, False], "invalid_tensor_data", "must be integers"),
            ("FP32", [1], ["1"], "invalid_tensor_data", "must be numbers"),
            ("FP32", [2], [1.0, None], "invalid_tensor_data", "must be numbers"),
            ("FP32", [1], [{"a": 1}], "invalid_tensor_data", "must be numbers"),
            ("BYTES", [2], ["a", 5], "invalid_tensor_data", "must be strings"),
            ("FP32", [2, 2], [[1.0, 2.0], [3.0]], "invalid_tensor_data", "not a regular array"),
            ("FP32", [3], 1.0, "invalid_tensor_data", "must be an array"),
            ("FP32", [3], [1.0, 2.0], "invalid_tensor_shape", "needs 3 elements, got 2"),
            ("BYTES", [3], ["a"], "invalid_tensor_shape", "needs 3 elements, got 1"),
            ("FP32", [1], [[[1.0]]], "invalid_tensor_shape", "nested deeper than shape"),
            ("BYTES", [1], [[["a"]]], "invalid_tensor_shape", "nested deeper than shape"),
        ],
    )
    def test_bad_json_data(
        self, datatype: str, shape: list[int], data: Any, code: str, fragment: str
    ) -> None:
        doc = one_input(datatype=datatype, shape=shape, data=data)
        expect(code, fragment, orjson.dumps(doc))
        with pytest.raises(InvalidInput) as err:
            parse_json(doc)
        assert "input 'x'" in err.value.message

    def test_deeply_nested_data_stops_before_the_stack(self) -> None:
        for datatype, leaf in (("FP32", b"1.0"), ("BYTES", b'"a"')):
            nested = b"[" * 1000 + leaf + b"]" * 1000
            body = b'{"inputs":[{"name":"x","datatype":"%s","shape":[1],"data":%s}]}' % (
                datatype.encode(),
                nested,
            )
            expect("invalid_tensor_shape", "nested deeper", body)

    def test_bytes_nested_ragged_is_flattened_in_order(self) -> None:
        (tensor,) = parse_json(
            one_input(datatype="BYTES", shape=[2, 2], data=[["a", "b"], ["c", "d"]])
        ).inputs
        assert tensor.data.tolist() == [[b"a", b"b"], [b"c", b"d"]]

    def test_missing_data(self) -> None:
        doc = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1]}]}
        expect("invalid_tensor_data", "needs 'data'", orjson.dumps(doc))

    def test_json_float_to_fp16_overflow_is_infinity_not_an_error(self) -> None:
        (tensor,) = parse_json(one_input(datatype="FP16", shape=[1], data=[1e10])).inputs
        assert np.isinf(tensor.data[0])

    @pytest.mark.parametrize(
        ("datatype", "shape", "raw", "extra", "fragment"),
        [
            ("FP32", [3], b"\0" * 8, {}, "binary data is 8 bytes, but FP32 of shape [3] needs 12"),
            ("FP32", [1], b"\0" * 8, {}, "needs 4"),
            ("BOOL", [2], b"\x01\x02", {}, "other than 0 and 1"),
            ("BYTES", [2], struct.pack("<I", 1) + b"a", {}, "too short for 2 BYTES"),
            ("BYTES", [1], struct.pack("<I", 10) + b"abc", {}, "claims 10 bytes, only 3 remain"),
            ("BYTES", [1], struct.pack("<I", 1) + b"ab", {}, "1 bytes left after 1 BYTES"),
            ("BYTES", [3], struct.pack("<I", 4) + b"abcd", {}, "too short for 3"),
            ("BYTES", [2], struct.pack("<I", 4) + b"abcd", {}, "ends after 1 of 2 BYTES"),
            (
                "BYTES",
                [2],
                struct.pack("<I", 1) + b"abcdef",
                {},
                "element 1 claims 1701077858 bytes, only 1 remain",
            ),
            ("BYTES", [0], b"abcd", {}, "4 bytes left after 0"),
        ],
    )
    def test_bad_binary_data(
        self, datatype: str, shape: list[int], raw: bytes, extra: dict[str, Any], fragment: str
    ) -> None:
        body, header = binary_input(datatype, shape, raw, **extra)
        expect("invalid_binary_data", fragment, body, header)

    @pytest.mark.parametrize("size", [-1, True, "4", 1.5])
    def test_bad_binary_data_size(self, size: Any) -> None:
        doc = {
            "inputs": [
                {
                    "name": "x",
                    "datatype": "INT8",
                    "shape": [1],
                    "parameters": {"binary_data_size": size},
                }
            ]
        }
        header = orjson.dumps(doc)
        expect("invalid_binary_data", "non-negative integer", header + b"\0", len(header))

    def test_binary_size_beyond_the_body(self) -> None:
        body, header = binary_input("INT8", [4], b"\0" * 4)
        expect("invalid_binary_data", "binary_data_size is 4, but only 3", body[:-1], header)

    def test_binary_without_header_length(self) -> None:
        body, _ = binary_input("INT8", [4], b"\0" * 4)
        expect("invalid_json", "not valid JSON", body, None)
        header = body[:-4]
        expect("invalid_binary_data", "only 0 bytes", header, None)

    def test_unclaimed_trailing_bytes(self) -> None:
        body, header = binary_input("INT8", [4], b"\0" * 4)
        expect("invalid_binary_data", "2 bytes of binary data", body + b"zz", header)
        json_only = orjson.dumps(one_input())
        expect("invalid_binary_data", "3 bytes", json_only + b"abc", len(json_only))

    def test_both_data_and_binary(self) -> None:
        body, header = binary_input("INT8", [1], b"\0")
        doc = orjson.loads(body[:header])
        doc["inputs"][0]["data"] = [1]
        header_bytes = orjson.dumps(doc)
        expect("invalid_tensor_data", "both 'data'", header_bytes + b"\0", len(header_bytes))

    def test_shared_memory_and_classification_are_refused(self) -> None:
        doc = one_input(parameters={"shared_memory_region": "r", "shared_memory_byte_size": 8})
        expect("unsupported_parameter", "input 'x': shared memory", orjson.dumps(doc))
        for param in ({"classification": 3}, {"shared_memory_region": "r"}):
            doc = {**one_input(), "outputs": [{"name": "y", "parameters": param}]}
            expect("unsupported_parameter", "output 'y'", orjson.dumps(doc))

    def test_wire_parameters_are_lifted_out(self) -> None:
        body, header = binary_input("INT8", [1], b"\x05", note="kept")
        doc = orjson.loads(body[:header])
        doc["parameters"] = {"binary_data_output": True, "user": 1}
        doc["outputs"] = [{"name": "y", "parameters": {"binary_data": False, "k": "v"}}]
        head = orjson.dumps(doc)
        request = parse_infer_request(head + b"\x05", len(head))
        assert request.parameters == {"user": 1}
        assert request.binary_data_output is True
        assert request.inputs[0].parameters == {"note": "kept"}
        assert request.outputs == (RequestOutput("y", binary_data=False, parameters={"k": "v"}),)
