"""The codec's fast paths against the general ones they short-cut.

Every fast path must give the very answer of the general path: the same arrays
(dtype, shape, bits) or the same error (type, code, message), and no warning the
general path would not give (warnings are errors in this suite). Requests are
parsed twice, once as they come and once with the fast paths switched off, and
the outcomes compared.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from modelport.api.v2 import InferenceRequest, RequestOutput, codec, encode_infer_response
from modelport.api.v2.types import RequestInput
from modelport.api.v2.validate import validate_request
from modelport.errors import InvalidInput
from modelport.manifest import TensorSpec
from modelport.runtime import tensors
from modelport.runtime.tensors import (
    NUMPY_TO_OIP,
    OIP_TO_NUMPY,
    decode_json_tensor,
    json_float_data,
)
from modelport.testing.switches import general_path

DATATYPES = [*OIP_TO_NUMPY, "FP8", "float32"]
PROPERTY = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def outcome(call: Callable[[], Any]) -> tuple[Any, ...]:
    """A comparable record of what ``call`` did: its result, or its exception."""
    try:
        result = call()
    except InvalidInput as exc:
        return ("invalid", exc.code, exc.message, exc.extra)
    except Exception as exc:  # a warning turned error, or anything else unexpected
        return ("raised", type(exc).__name__, str(exc))
    return ("ok", describe(result))


def describe(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        if value.dtype.kind == "O":
            return ("array", value.dtype.str, value.shape, value.tolist())
        flags = (value.flags.c_contiguous, value.flags.writeable)
        return ("array", value.dtype.str, value.shape, value.tobytes(), flags)
    if isinstance(value, InferenceRequest):
        return (
            [describe(tensor) for tensor in value.inputs],
            value.outputs,
            value.id,
            value.parameters,
            value.binary_data_output,
        )
    if isinstance(value, RequestInput):
        return (
            value.name,
            value.datatype,
            value.shape,
            describe(value.data),
            value.nbytes,
            value.parameters,
        )
    return value


def parse_both_ways(body: bytes, **kwargs: Any) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    fast = outcome(lambda: codec.parse_infer_request(body, None, **kwargs))
    with general_path():
        # A bytearray takes the memoryview route of bodies with binary data.
        slow = outcome(lambda: codec.parse_infer_request(bytearray(body), None, **kwargs))
    return fast, slow


# Values chosen around every edge the general path draws: type, range per
# datatype, float32/float16 overflow, 64-bit integers, non-numbers.
EDGE_NUMBERS = [
    0, 1, -1, 127, 128, -128, -129, 255, 256, 32767, 32768, -32769, 65535, 65536,
    2**31 - 1, 2**31, -(2**31) - 1, 2**32 - 1, 2**32, 2**63 - 1, 2**63, -(2**63),
    -(2**63) - 1, 2**64 - 1, 2**64, 10**30,
    0.0, -0.0, 0.5, -1.5, 1e-310, 1e-50, 65504.0, 65520.0, 1e10,
    3.4028234663852886e38, 3.4028235677973366e38, 3.5e38, -3.5e38, 1e39, 1e154, 1e200,
    1.7976931348623157e308,
]  # fmt: skip
OTHERS: list[Any] = [True, False, None, "1.0", "", {}, {"a": 1}]

number = st.one_of(
    st.sampled_from(EDGE_NUMBERS),
    st.integers(min_value=-(2**65), max_value=2**65),
    st.floats(allow_nan=False, allow_infinity=False),
    st.floats(min_value=-70000, max_value=70000, allow_nan=False),
)
scalar = st.one_of(number, number, number, st.sampled_from(OTHERS))


@st.composite
def json_data(draw: st.DrawFn, shape: Sequence[int]) -> Any:
    """Mostly well-formed data for ``shape``, with a chance of each kind of fault."""
    count = math.prod(shape)
    kind = draw(st.sampled_from(["float", "int", "bool", "number", "any"]))
    element = {
        "float": st.floats(-1e6, 1e6) | st.sampled_from([1e39, -0.0, 70000.0]),
        "int": st.integers(-300, 300) | st.sampled_from([2**63, -(2**63), 2**64]),
        "bool": st.booleans(),
        "number": number,
        "any": scalar,
    }[kind]
    flat = draw(st.lists(element, min_size=count, max_size=count))
    fault = draw(st.sampled_from(["none"] * 6 + ["count", "nested", "deep", "ragged", "odd"]))
    if fault == "count":
        flat = flat + draw(st.lists(element, min_size=1, max_size=3)) if flat else [1.0]
    if fault == "odd" and flat:
        flat[draw(st.integers(0, len(flat) - 1))] = draw(st.sampled_from(OTHERS))
    if fault == "deep":
        return [flat]
    if fault == "ragged" and len(flat) > 1:
        return [flat[:1], flat[1:]]
    nest = fault == "nested" or (len(shape) > 1 and draw(st.booleans()))
    if nest and shape and len(flat) == count:
        return np.array(flat, dtype=object).reshape(shape).tolist()
    return flat


@st.composite
def input_doc(draw: st.DrawFn, name: str) -> dict[str, Any]:
    datatype = draw(st.sampled_from(DATATYPES[:12]) | st.sampled_from(DATATYPES))
    shape = draw(st.lists(st.integers(0, 4), min_size=0, max_size=3))
    doc: dict[str, Any] = {"name": name, "datatype": datatype, "shape": shape}
    doc["data"] = draw(json_data(shape))
    extra = draw(st.sampled_from([None, None, None, "params", "empty_params", "bad_shape"]))
    if extra == "params":
        doc["parameters"] = {"custom": 1}
    elif extra == "empty_params":
        doc["parameters"] = {}
    elif extra == "bad_shape":
        doc["shape"] = draw(st.sampled_from([[-1], [1.5], "3", [True]]))
    return doc


@st.composite
def request_doc(draw: st.DrawFn) -> dict[str, Any]:
    names = draw(st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=3))
    return {"inputs": [draw(input_doc(name)) for name in names]}


class TestParseFastPath:
    @given(request_doc())
    @PROPERTY
    def test_property_same_outcome_as_the_general_path(self, doc: dict[str, Any]) -> None:
        # The standard library writes integers past 64 bits, which orjson refuses to.
        body = json.dumps(doc, separators=(",", ":")).encode()
        fast, slow = parse_both_ways(body, max_elements=40)
        assert fast == slow

    @given(request_doc())
    @PROPERTY
    def test_property_non_finite_json_as_rapidjson_writes_it(self, doc: dict[str, Any]) -> None:
        for tensor in doc["inputs"]:
            if isinstance(tensor["data"], list) and tensor["data"]:
                tensor["data"][0] = float("nan")
                tensor["data"][-1] = float("-inf")
        body = json.dumps(doc).encode()  # NaN and -Infinity, as python-rapidjson writes
        fast, slow = parse_both_ways(body)
        assert fast == slow

    @pytest.mark.parametrize(
        "body",
        [
            b"",
            b"{",
            b"[]",
            b"null",
            b'{"inputs": [}',
            b'{"inputs": [{"name": "x", "datatype": "FP32", "shape": [1], "data": [NaN]}]}',
            b'{"inputs": [{"name": "x", "datatype": "FP32", "shape": [1], "data": [nan]}]}',
            b'{"inputs": [{"name": "x", "datatype": "FP32", "shape": [2], "data": [1, 2]}]}\xff',
            b"\xef\xbb\xbf{}",
        ],
    )
    def test_bodies_that_are_not_plain_json_objects(self, body: bytes) -> None:
        fast, slow = parse_both_ways(body)
        assert fast == slow

    @pytest.mark.parametrize(
        ("datatype", "data"),
        [
            ("FP32", [1.5, -0.0, 3.4028234663852886e38]),
            ("FP32", [1, 2, True]),
            ("FP16", [65504.0, -1.5]),
            ("FP64", [1e308, -1e-310]),
            ("INT8", [-128, 127, 0]),
            ("UINT64", [0, 2**63 - 1, 5]),
            ("INT64", [-(2**63), 2**63 - 1, 0]),
            ("BOOL", [True, False, True]),
        ],
    )
    def test_common_requests_take_the_fast_path(self, datatype: str, data: list[Any]) -> None:
        """These must not fall back, or the fast path has stopped paying."""
        shape = [len(data)]
        want = decode_json_tensor("x", datatype, shape, data)
        got = tensors.decode_json_numbers_fast(OIP_TO_NUMPY[datatype], shape, len(data), data)
        assert got is not None
        assert describe(got) == describe(want)

    @pytest.mark.parametrize(
        ("datatype", "data"),
        [
            ("FP32", [1e39]),  # overflows: the general path casts under errstate
            ("FP16", [70000]),  # an integer that overflows FP16
            ("FP32", [None]),
            ("FP32", ["1.0"]),
            ("FP32", [True]),
            ("INT8", [128]),
            ("UINT8", [-1]),
            ("INT64", [1.0]),
            ("UINT64", [2**64 - 1]),
            ("BOOL", [1]),
            ("FP32", [[1.0]]),
        ],
    )
    def test_unusual_data_falls_back(self, datatype: str, data: list[Any]) -> None:
        count = len(data)
        dtype = OIP_TO_NUMPY[datatype]
        assert tensors.decode_json_numbers_fast(dtype, [count], count, data) is None

    def test_the_fast_path_is_what_answers_the_bench_request(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The comparisons above only mean something if the fast path answers."""
        answers: list[bool] = []
        real = tensors.decode_json_numbers_fast

        def spy(*args: Any) -> Any:
            array = real(*args)
            answers.append(array is not None)
            return array

        monkeypatch.setattr(tensors, "decode_json_numbers_fast", spy)
        doc = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 3], "data": [1.0] * 3}]}
        codec.parse_infer_request(orjson.dumps(doc))
        assert answers == [True]
        with general_path():
            assert tensors.decode_json_numbers_fast(np.dtype(np.float32), [1], 1, [1.0]) is None


class TestDecodeJsonTensor:
    """In-process callers (examples, fallbacks) pass data orjson never makes."""

    @given(
        st.sampled_from(DATATYPES[:12]),
        st.lists(st.integers(1, 3), min_size=1, max_size=2),
        st.data(),
    )
    @PROPERTY
    def test_property_numpy_scalars_and_tuples(
        self, datatype: str, shape: list[int], data: st.DataObject
    ) -> None:
        count = math.prod(shape)
        dtype = data.draw(st.sampled_from([np.float16, np.float32, np.float64, np.int8, np.uint64]))
        values = data.draw(hnp.arrays(dtype, count)).tolist()
        as_scalars = [np.dtype(dtype).type(v) for v in values]
        for payload in (values, as_scalars, [tuple(as_scalars)], [as_scalars]):
            fast = outcome(lambda p=payload: decode_json_tensor("x", datatype, shape, p))
            with general_path():
                slow = outcome(lambda p=payload: decode_json_tensor("x", datatype, shape, p))
            assert fast == slow


ENCODABLE = (
    hnp.boolean_dtypes()
    | hnp.integer_dtypes(endianness="?")
    | hnp.unsigned_integer_dtypes(endianness="?")
    | hnp.floating_dtypes(endianness="?", sizes=(16, 32, 64))
)


class TestEncodeFastPath:
    @given(
        hnp.arrays(ENCODABLE, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=3)),
        st.booleans(),
    )
    @PROPERTY
    def test_property_same_bytes_as_the_general_conversion(
        self, array: np.ndarray, transpose: bool
    ) -> None:
        if transpose:
            array = array.T  # not C-contiguous once two dimensions exceed 1
        datatype = NUMPY_TO_OIP[array.dtype.newbyteorder("=")]
        general = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("=")).reshape(-1)
        if general.dtype.kind == "f":  # NaN and infinities as literals (test_codec.py)
            general = json_float_data(general)
        doc = {
            "model_name": "m",
            "outputs": [
                {"name": "y", "datatype": datatype, "shape": list(array.shape), "data": general}
            ],
        }
        want = orjson.dumps(doc, option=orjson.OPT_SERIALIZE_NUMPY)
        assert encode_infer_response({"y": array}, model_name="m").body == want


# The checks of validate_request as they were before its loop was tightened.
def reference_validate(
    request: InferenceRequest,
    inputs: Sequence[TensorSpec],
    outputs: Sequence[TensorSpec],
    *,
    max_input_bytes: int | None = None,
) -> None:
    def names(specs: dict[str, TensorSpec]) -> str:
        return ", ".join(f"'{name}'" for name in specs)

    specs = {spec.name: spec for spec in inputs}
    given_names = {tensor.name for tensor in request.inputs}
    for tensor in request.inputs:
        spec = specs.get(tensor.name)
        if spec is None:
            raise InvalidInput(
                f"unknown input '{tensor.name}'; the model takes {names(specs)}",
                code="invalid_input",
                input=tensor.name,
            )
        if tensor.datatype != spec.datatype:
            raise InvalidInput(
                f"input '{tensor.name}': expected datatype {spec.datatype}, got {tensor.datatype}",
                code="invalid_input",
                input=tensor.name,
            )
        shape_ok = len(spec.shape) == len(tensor.shape) and all(
            want == -1 or want == got for want, got in zip(spec.shape, tensor.shape, strict=True)
        )
        if not shape_ok:
            raise InvalidInput(
                f"input '{tensor.name}': expected shape {list(spec.shape)}, "
                f"got {list(tensor.shape)}",
                code="invalid_input",
                input=tensor.name,
            )
    missing = [name for name in specs if name not in given_names]
    if missing:
        raise InvalidInput(
            f"missing input '{missing[0]}'; the model takes {names(specs)}",
            code="invalid_input",
            input=missing[0],
        )
    if request.outputs:
        declared = {spec.name for spec in outputs}
        for output in request.outputs:
            if output.name not in declared:
                raise InvalidInput(
                    f"unknown output '{output.name}'; the model gives "
                    f"{names({spec.name: spec for spec in outputs})}",
                    code="unknown_output",
                    output=output.name,
                )
    if max_input_bytes is not None:
        total = sum(tensor.nbytes for tensor in request.inputs)
        if total > max_input_bytes:
            raise InvalidInput(
                f"inputs hold {total} bytes, above the limit of {max_input_bytes}",
                code="inputs_too_large",
            )


NAMES = st.sampled_from(["a", "b", "c"])
SMALL_SHAPE = st.lists(st.integers(-1, 3), min_size=0, max_size=3)


@st.composite
def validate_case(draw: st.DrawFn) -> tuple[Any, ...]:
    specs = [
        TensorSpec(name=name, datatype=draw(st.sampled_from(["FP32", "INT64"])), shape=shape)
        for name, shape in zip(
            draw(st.lists(NAMES, min_size=0, max_size=3, unique=True)),
            draw(st.lists(SMALL_SHAPE, min_size=3, max_size=3)),
            strict=False,
        )
    ]
    outputs = [TensorSpec(name=name, datatype="FP32", shape=[-1]) for name in ("y", "z")]
    tensors_given = tuple(
        RequestInput(
            name=draw(NAMES),  # duplicates too: a request built in process may hold them
            datatype=draw(st.sampled_from(["FP32", "INT64"])),
            shape=tuple(draw(st.lists(st.integers(0, 3), max_size=3))),
            data=np.zeros(0),
            nbytes=draw(st.integers(0, 100)),
        )
        for _ in range(draw(st.integers(0, 4)))
    )
    requested = tuple(
        RequestOutput(name=name) for name in draw(st.lists(st.sampled_from("xyz"), max_size=2))
    )
    request = InferenceRequest(inputs=tensors_given, outputs=requested)
    limit = draw(st.none() | st.integers(0, 200))
    return request, specs, outputs, limit


class TestValidateRequest:
    @given(validate_case())
    @PROPERTY
    def test_property_same_outcome_as_the_reference(self, case: tuple[Any, ...]) -> None:
        request, specs, outputs, limit = case
        got = outcome(lambda: validate_request(request, specs, outputs, max_input_bytes=limit))
        want = outcome(lambda: reference_validate(request, specs, outputs, max_input_bytes=limit))
        assert got == want
