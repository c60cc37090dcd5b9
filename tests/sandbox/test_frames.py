"""Frames between the server and a warm worker: tensors of every kind round-trip through
their raw buffers, and a malformed or truncated frame is refused with a reason."""

from __future__ import annotations

import io
import json
import struct
from typing import Any

import numpy as np
import pytest

from modelport.sandbox import frames


def roundtrip(
    header: dict[str, Any], tensors: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    stream = io.BytesIO(b"".join(bytes(part) for part in frames.encode(header, tensors)))
    return frames.decode(exact(stream))


def exact(stream: io.BytesIO) -> Any:
    def read_exact(n: int) -> bytes:
        data = stream.read(n)
        if len(data) != n:
            raise EOFError
        return data

    return read_exact


@pytest.mark.parametrize(
    "array",
    [
        np.arange(12, dtype=np.float32).reshape(3, 4),
        np.array([[1, -2], [3, 4]], dtype=np.int64),
        np.array([True, False, True]),
        np.array(7, dtype=np.uint8),
        np.zeros((0, 5), dtype=np.float64),
        np.arange(10, dtype=np.int16)[::2],  # not contiguous
    ],
)
def test_numeric_tensors_round_trip(array: np.ndarray) -> None:
    header, tensors = roundtrip({"stage": "preprocess"}, {"t": array})
    assert header == {"stage": "preprocess"}
    assert tensors["t"].dtype == array.dtype
    assert np.array_equal(tensors["t"], array)


def test_text_and_bytes_round_trip_as_bytes() -> None:
    texts = np.array(["héllo", "", "wörld"], dtype=object)
    raw = np.array([[b"\x00\xff", b"ab"]], dtype=object)
    unicode = np.array(["a", "bc"])
    _, tensors = roundtrip({}, {"texts": texts, "raw": raw, "unicode": unicode})
    assert tensors["texts"].tolist() == ["héllo".encode(), b"", "wörld".encode()]
    assert tensors["raw"].shape == (1, 2) and tensors["raw"].tolist() == [[b"\x00\xff", b"ab"]]
    assert tensors["unicode"].tolist() == [b"a", b"bc"]


def test_a_tensor_with_no_wire_form_is_refused() -> None:
    with pytest.raises(frames.FrameError, match="neither bytes nor text"):
        frames.encode({}, {"t": np.array([{"a": 1}], dtype=object)})
    with pytest.raises(frames.FrameError, match="no tensor form"):
        frames.encode({}, {"t": np.array([1 + 2j])})


def frame(header: dict[str, Any], payload: bytes = b"") -> io.BytesIO:
    head = json.dumps(header).encode()
    return io.BytesIO(struct.pack(">I", len(head)) + head + payload)


@pytest.mark.parametrize(
    ("header", "payload", "reason"),
    [
        ({"tensors": [{"name": "t", "dtype": "<f4", "shape": [2], "nbytes": 4}]}, b"\0" * 4, "do not make"),
        ({"tensors": [{"name": "t", "dtype": "<c8", "shape": [1], "nbytes": 8}]}, b"\0" * 8, "do not make"),
        ({"tensors": [{"name": "t", "dtype": "nope", "shape": [1], "nbytes": 1}]}, b"\0", "unknown dtype"),
        ({"tensors": [{"name": "t", "dtype": "bytes", "shape": [2], "nbytes": 6}]}, struct.pack("<I", 2) + b"ab", "truncated"),
        ({"tensors": [{"name": "t", "dtype": "bytes", "shape": [1], "nbytes": 7}]}, struct.pack("<I", 2) + b"abc", "bytes left"),
        ({"tensors": [{"name": "t", "shape": [1], "nbytes": 1}]}, b"\0", "no name, dtype"),
        ({"tensors": [{"name": "t", "dtype": "<f4", "shape": [-1], "nbytes": 4}]}, b"\0" * 4, "bad size or shape"),
        ({"stage": "x"}, b"", "not a JSON object with 'tensors'"),
    ],
)  # fmt: skip
def test_a_malformed_frame_is_refused(header: dict[str, Any], payload: bytes, reason: str) -> None:
    with pytest.raises(frames.FrameError, match=reason):
        frames.decode(exact(frame(header, payload)))


def test_a_truncated_frame_ends_the_read() -> None:
    whole = b"".join(bytes(p) for p in frames.encode({}, {"t": np.ones(4, dtype=np.float32)}))
    with pytest.raises(EOFError):
        frames.decode(exact(io.BytesIO(whole[:-1])))


def test_a_huge_header_is_refused_before_it_is_read() -> None:
    stream = io.BytesIO(struct.pack(">I", frames.MAX_HEADER_BYTES + 1))
    with pytest.raises(frames.FrameError, match="over"):
        frames.decode(exact(stream))
