"""Pure merge/split of requests into batches and back."""

from __future__ import annotations

import numpy as np
import pytest

from modelport.errors import Internal
from modelport.runtime.batching.requests import batch_group, batch_rows, merge, split


def f32(*shape: int, start: float = 0.0) -> np.ndarray:
    return (np.arange(int(np.prod(shape)), dtype=np.float32) + start).reshape(shape)


@pytest.mark.parametrize(
    ("a", "b", "params_a", "params_b", "compatible"),
    [
        ({"x": f32(1, 4)}, {"x": f32(3, 4)}, None, None, True),
        ({"x": f32(1, 4)}, {"x": f32(1, 5)}, None, None, False),
        ({"x": f32(1, 4)}, {"x": f32(1, 4).astype(np.float64)}, None, None, False),
        ({"x": f32(1, 4)}, {"z": f32(1, 4)}, None, None, False),
        ({"x": f32(1, 4)}, {"x": f32(1, 4)}, {"t": 1}, {"t": 1}, True),
        ({"x": f32(1, 4)}, {"x": f32(1, 4)}, {"t": 1}, {"t": 2}, False),
        ({"x": f32(1, 4)}, {"x": f32(1, 4)}, {"t": [1, 2]}, {"t": [1, 2]}, True),
        ({"x": f32(1, 4)}, {"x": f32(1, 4)}, {"t": [1, 2]}, {"t": [2, 1]}, False),
        ({"x": f32(2, 2), "m": f32(2)}, {"m": f32(5), "x": f32(5, 2)}, None, None, True),
        ({"x": f32(2, 2), "m": f32(2)}, {"m": f32(5, 1), "x": f32(5, 2)}, None, None, False),
    ],
)
def test_batch_group_says_which_requests_merge(a, b, params_a, params_b, compatible) -> None:
    assert (batch_group(a, params_a) == batch_group(b, params_b)) is compatible


@pytest.mark.parametrize(
    "inputs",
    [
        {"x": np.float32(3.0).reshape(())},  # no batch dimension
        {"x": f32(2, 4), "m": f32(3, 4)},  # inputs disagree on rows
    ],
)
def test_unbatchable_requests_get_a_group_of_their_own(inputs) -> None:
    assert batch_group(inputs, None) != batch_group(inputs, None)


def test_merge_concatenates_and_split_restores_each_request_exactly() -> None:
    parts = [
        {"x": f32(1, 3), "m": np.array([[True]])},
        {"x": f32(4, 3, start=100), "m": np.array([[False]] * 4)},
        {"x": f32(2, 3, start=200), "m": np.array([[True], [False]])},
    ]
    merged, sizes = merge(parts)
    assert sizes == [1, 4, 2]
    assert merged["x"].shape == (7, 3)
    assert merged["m"].shape == (7, 1)
    back = split({"y": merged["x"] * 2, "m": merged["m"]}, sizes)
    assert len(back) == 3
    for part, out in zip(parts, back, strict=True):
        np.testing.assert_array_equal(out["y"], part["x"] * 2)
        np.testing.assert_array_equal(out["m"], part["m"])


def test_bytes_tensors_merge_and_split() -> None:
    parts = [
        {"s": np.array([b"a"], dtype=object)},
        {"s": np.array([b"bb", b"ccc"], dtype=object)},
    ]
    merged, sizes = merge(parts)
    assert merged["s"].tolist() == [b"a", b"bb", b"ccc"]
    back = split(merged, sizes)
    assert [b["s"].tolist() for b in back] == [[b"a"], [b"bb", b"ccc"]]


def test_a_single_request_passes_through_untouched() -> None:
    x = f32(2, 4)
    merged, sizes = merge([{"x": x}])
    assert merged["x"] is x and sizes == [2]
    (out,) = split({"y": x}, sizes)
    assert out["y"] is x


def test_outputs_that_do_not_follow_the_batch_rows_are_an_error() -> None:
    with pytest.raises(Internal) as info:
        split({"y": f32(1, 4)}, [1, 2])
    assert info.value.code == "unbatchable_output"


def test_batch_rows() -> None:
    assert batch_rows({"x": f32(5, 2)}) == 5
    assert batch_rows({"x": np.float32(1).reshape(())}) == 1
