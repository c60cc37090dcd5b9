"""Tensors through one shared-memory segment: layout, round trip, refusals."""

from __future__ import annotations

import os
import socket
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
    planned = tensors.plan(arrays)
    assert all(offset % 64 == 0 for _, _, _, offset, _ in planned.layout)
    segment = SharedMemory(create=True, size=planned.size)
    try:
        tensors.write(segment, arrays, planned)
        back = tensors.read(segment, planned.layout, copy=True)
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
    planned = tensors.plan(arrays)
    segment = SharedMemory(create=True, size=planned.size)
    try:
        tensors.write(segment, arrays, planned)
        back = tensors.read(segment, planned.layout, copy=True)
    finally:
        segment.close()
        segment.unlink()
    np.testing.assert_array_equal(back["t"], base.T)
    np.testing.assert_array_equal(back["s"], base[:, ::2])


def strings(*items: object) -> np.ndarray:
    out = np.empty(len(items), dtype=object)
    out[:] = items
    return out


def test_string_tensors_cross_length_prefixed_beside_numbers() -> None:
    from modelport.runtime.process.segments import Segment

    arrays = {
        "n": np.arange(3, dtype=np.int16),
        "text": strings(b"", "naïve", b"a\x00b", "x" * 1000).reshape(2, 2),
        "y": np.ones((2, 2), np.float32),
    }
    planned = tensors.plan(arrays)
    assert all(offset % 64 == 0 for _, _, _, offset, _ in planned.layout)
    # Open Inference Protocol binary form: a 4-byte little-endian length, then the bytes.
    assert planned.encoded["text"][:9] == b"\x00\x00\x00\x00\x06\x00\x00\x00n"
    segment = Segment.create(planned.size)
    try:
        tensors.write(segment, arrays, planned)
        back = tensors.read(segment, planned.layout, copy=True)
    finally:
        segment.close()
    assert back["text"].dtype == object and back["text"].shape == (2, 2)
    # Text and bytes mixed: all come back as bytes.
    assert back["text"].tolist() == [[b"", "naïve".encode()], [b"a\x00b", b"x" * 1000]]
    np.testing.assert_array_equal(back["n"], arrays["n"])
    np.testing.assert_array_equal(back["y"], arrays["y"])


@pytest.mark.parametrize(
    ("items", "kind", "back"),
    [
        (("hi", "naïve ✓", ""), "TEXT", ["hi", "naïve ✓", ""]),
        ((b"hi", b"\xff"), "BYTES", [b"hi", b"\xff"]),
        (("hi", b"there"), "BYTES", [b"hi", b"there"]),
    ],
    ids=["all text", "all bytes", "mixed"],
)
def test_string_tensors_come_back_with_the_type_they_left_with(
    items: tuple[object, ...], kind: str, back: list[object]
) -> None:
    """Text comes back as text, as a thread version answers it; bytes (or a mix) as bytes."""
    layout, data = _layout_of(text=strings(*items))
    assert layout[0][1] == kind
    read = tensors.read(_Bytes(bytearray(data)), layout, copy=True)["text"]
    assert read.dtype == object and read.tolist() == back


def test_text_that_is_not_utf8_is_a_layout_error() -> None:
    layout, data = _layout_of(text=strings(b"\xff\xfe"))
    layout[0][1] = "TEXT"  # a worker's lie: these bytes are no text
    with pytest.raises(tensors.LayoutError, match="not UTF-8"):
        tensors.read(_Bytes(bytearray(data)), layout, copy=True)


@pytest.mark.parametrize(
    "items", [({"a": 1},), (b"ok", 3), ("\ud800",)], ids=["dict", "number", "surrogate"]
)
def test_objects_that_are_not_text_are_refused_with_a_code(items: tuple[object, ...]) -> None:
    with pytest.raises(InvalidInput) as raised:
        tensors.plan({"text": strings(*items)})
    assert raised.value.code == "unsupported_tensor"
    assert "'text'" in raised.value.message


def _layout_of(**arrays: np.ndarray) -> tuple[tensors.Layout, bytes]:
    planned = tensors.plan(arrays)
    buffer = bytearray(planned.size)
    segment = _Bytes(buffer)
    tensors.write(segment, arrays, planned)
    return planned.layout, bytes(buffer)


class _Bytes:
    name = "test"

    def __init__(self, data: bytearray) -> None:
        self.data = data

    @property
    def buf(self) -> memoryview:
        return memoryview(self.data)


_TEXT = {"text": strings(b"abc", b"de")}  # 4+3+4+2 = 13 bytes at offset 0
_LIES: list[tuple[str, object, str]] = [
    ("not a list", {"text": 1}, "a layout is a list"),
    ("short entry", [["text", "BYTES", [2], 0]], "[name, dtype, shape, offset, nbytes]"),
    ("no name", [[1, "BYTES", [2], 0, 13]], "not a name"),
    ("twice", [["t", "<f4", [1], 0, 4], ["t", "<f4", [1], 0, 4]], "named twice"),
    ("negative dim", [["text", "BYTES", [-2], 0, 13]], "not a list of dimensions"),
    ("float dim", [["text", "BYTES", [2.0], 0, 13]], "not a list of dimensions"),
    ("bool offset", [["text", "BYTES", [2], True, 13]], "not inside the segment"),
    ("too many dims", [["text", "BYTES", [1] * 33, 0, 13]], "not a list of dimensions"),
    ("past the end", [["text", "BYTES", [2], 60, 13]], "not inside the segment"),
    ("huge region", [["text", "BYTES", [2], 0, 1 << 40]], "not inside the segment"),
    ("short region", [["text", "BYTES", [2], 0, 11]], "claims 2 bytes, only 0 remain"),
    ("cut length", [["text", "BYTES", [2], 0, 9]], "ends after 1 of 2 BYTES elements"),
    ("left over", [["text", "BYTES", [1], 0, 13]], "left after 1 BYTES elements"),
    ("huge count", [["text", "BYTES", [1 << 40, 1 << 40], 0, 13]], "too short"),
    ("objects", [["text", "|O", [1], 0, 8]], "not a dtype that crosses"),
    ("no dtype", [["text", "float128x", [1], 0, 8]], "not a dtype that crosses"),
    ("numbers past", [["text", "<f8", [1 << 40], 0, 8]], "bytes, not 8"),
]


@pytest.mark.parametrize(
    ("layout", "why"), [(lie, why) for _, lie, why in _LIES], ids=[i for i, *_ in _LIES]
)
def test_a_layout_that_does_not_hold_is_a_layout_error(layout: object, why: str) -> None:
    honest, data = _layout_of(**_TEXT)
    assert honest == [["text", "BYTES", [2], 0, 13]]
    with pytest.raises(tensors.LayoutError) as raised:
        tensors.read(_Bytes(bytearray(data)), layout, copy=True)
    assert why in str(raised.value)


def test_a_closed_segment_is_an_error_not_a_crash() -> None:
    planned = tensors.plan({"x": np.ones(3)})
    segment = SharedMemory(create=True, size=planned.size)
    segment.close()
    segment.unlink()
    with pytest.raises(ValueError):
        tensors.read(segment, planned.layout, copy=True)


def test_a_segment_crosses_a_socket_as_a_descriptor_and_has_no_name_on_disk() -> None:
    from multiprocessing.connection import Connection

    from modelport.runtime.process.protocol import receive, receive_fds, send, send_fds
    from modelport.runtime.process.segments import Segment

    arrays = {"x": np.arange(12, dtype=np.float32).reshape(3, 4)}
    planned = tensors.plan(arrays)
    layout = planned.layout
    ours, theirs = socket.socketpair()
    host, worker = Connection(ours.detach()), Connection(theirs.detach())
    shm = set(os.listdir("/dev/shm"))
    segment = Segment.create(planned.size)
    try:
        tensors.write(segment, arrays, planned)
        send(host, {"op": "execute", "fds": [segment.name]})
        send_fds(host, [segment.fd])
        send(host, {"op": "stop"})
        message = receive(worker)
        (fd,) = receive_fds(worker, len(message["fds"]))
        attached = Segment.attach(fd, segment.name)
        # The control stream goes on after the descriptor.
        assert receive(worker) == {"op": "stop"}
        np.testing.assert_array_equal(tensors.read(attached, layout, copy=True)["x"], arrays["x"])
        # Shared, not copied: what the worker writes the host reads.
        tensors.write(attached, {"x": arrays["x"] * 2}, planned)
        np.testing.assert_array_equal(
            tensors.read(segment, layout, copy=True)["x"], arrays["x"] * 2
        )
        attached.close()
        assert set(os.listdir("/dev/shm")) <= shm
    finally:
        segment.close()
        host.close()
        worker.close()
    with pytest.raises(ValueError):
        tensors.read(segment, layout, copy=True)


def test_descriptors_that_do_not_come_are_the_end_of_the_stream() -> None:
    from multiprocessing.connection import Connection

    from modelport.runtime.process.protocol import receive_fds, send

    ours, theirs = socket.socketpair()
    host, worker = Connection(ours.detach()), Connection(theirs.detach())
    try:
        send(host, {"op": "stop"})  # bytes where a descriptor was expected
        with pytest.raises(EOFError):
            receive_fds(worker, 1)
    finally:
        host.close()
        worker.close()
