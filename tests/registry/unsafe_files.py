"""Code-bearing files built for tests. Never load them: they would run their payload."""

from __future__ import annotations

import bz2
import gzip
import io
import json
import lzma
import os
import pickle
import struct
import zipfile
import zlib

import numpy as np

PAYLOAD = "echo modelport-test-payload-ran > /dev/null"


class Exploit:
    """Pickles to a call of ``os.system`` (what a malicious model file carries)."""

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, (PAYLOAD,))


def malicious_pickle(protocol: int = pickle.DEFAULT_PROTOCOL) -> bytes:
    return pickle.dumps(Exploit(), protocol=protocol)


def padded_pickle(protocol: int) -> bytes:
    """The call comes after 200 KB of plain data, far past any head that is read."""
    return pickle.dumps([b"x" * 200_000, Exploit()], protocol=protocol)


def legacy_torch_file() -> bytes:
    """PyTorch's legacy layout: plain-data pickles (magic number, version) then the model."""
    return b"".join(pickle.dumps(v, protocol=2) for v in (0x1950A86A20F9469CFC6C, 1001)) + (
        malicious_pickle(2)
    )


def zip_of(members: dict[str, bytes], *, compression: int = zipfile.ZIP_STORED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def torch_zip(pickle_name: str = "archive/data.pkl") -> bytes:
    """PyTorch's zip format (``torch.save``): the object graph pickled in ``data.pkl``
    beside raw tensor storages."""
    return zip_of(
        {
            pickle_name: malicious_pickle(2),
            "archive/byteorder": b"little",
            "archive/data/0": np.arange(64, dtype=np.float32).tobytes(),
            "archive/version": b"3\n",
        }
    )


def compressed(kind: str, data: bytes) -> bytes:
    """joblib's compressed dumps are a whole pickle stream compressed."""
    return {
        "gzip": gzip.compress,
        "zlib": zlib.compress,
        "bz2": bz2.compress,
        "xz": lzma.compress,
    }[kind](data)


def npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=True)
    return buffer.getvalue()


def keras_archive(*, with_lambda: bool) -> bytes:
    layers: list[dict[str, object]] = [{"class_name": "Dense", "config": {"units": 4}}]
    if with_lambda:
        code = {"class_name": "__lambda__", "config": {"code": "4wEAAAAAAAAA"}}
        layers.append({"class_name": "Lambda", "config": {"function": code}})
    config = {"class_name": "Sequential", "config": {"layers": layers}}
    return zip_of(
        {
            "metadata.json": json.dumps({"keras_version": "3.6.0"}).encode(),
            "config.json": json.dumps(config).encode(),
            "model.weights.h5": b"\x89HDF\r\n\x1a\n" + bytes(64),
        }
    )


def safetensors_file() -> bytes:
    """A safetensors file whose header length (640) starts it with the bytes of a pickle
    protocol marker, ``\\x80\\x02``."""
    header = json.dumps({"w": {"dtype": "F32", "shape": [160], "data_offsets": [0, 640]}})
    raw = header.encode().ljust(640)
    return struct.pack("<Q", len(raw)) + raw + np.ones(160, dtype=np.float32).tobytes()
