"""Tensors through one shared-memory segment: layout, round trip, refusals."""

from __future__ import annotations

from multiprocessing.shared_memory import SharedMemory

import numpy as np
import pytest

from modelport.errors import InvalidInput
from modelport.runtime.process import tensors

# A shared-memory segment starts Python's resource tracker, a process of its own.
pytestmark = pytest.mark.slow


def test_arrays_round_trip_aligned_through_a_segment() -> None:
    arrays = {
        "a": np.arange(7, dtype=np.int8),
        "b": np.linspace(0, 1, 12, dtype=np.float64).reshape(3, 4),
        "c": np.array(True),
        "d": np.zeros((0, 3), np.float32),
    }
    layout, size = tensors.plan(arrays)
    assert all(offset % 64 == 0 for *_, offset in layout)
    segment = SharedMemory(create=True, size=size)
    try:
        tensors.write(segment, arrays, layout)
        back = tensors.read(segment, layout, copy=True)
    finally:
        segment.close()
        segment.unlink()
    assert list(back) == list(arrays)
    for name, array in arrays.items():
        assert back[name].dtype == array.dtype and back[name].shape == array.shape
        np.testing.assert_array_equal(back[name], array)


def test_non_contiguous_and_big_endian_arrays_are_copied_as_values() -> None:
    base = np.arange(24, dtype=">i4").reshape(4, 6)
    arrays = {"t": base.T, "s": base[:, ::2]}
    layout, size = tensors.plan(arrays)
    segment = SharedMemory(create=True, size=size)
    try:
        tensors.write(segment, arrays, layout)
        back = tensors.read(segment, layout, copy=True)
    finally:
        segment.close()
        segment.unlink()
    np.testing.assert_array_equal(back["t"], base.T)
    np.testing.assert_array_equal(back["s"], base[:, ::2])


def test_object_tensors_are_refused_with_a_code() -> None:
    with pytest.raises(InvalidInput) as raised:
        tensors.plan({"text": np.array(["a", "b"], dtype=object)})
    assert raised.value.code == "unsupported_tensor"


def test_a_closed_segment_is_an_error_not_a_crash() -> None:
    layout, size = tensors.plan({"x": np.ones(3)})
    segment = SharedMemory(create=True, size=size)
    segment.close()
    segment.unlink()
    with pytest.raises(ValueError):
        tensors.read(segment, layout, copy=True)
