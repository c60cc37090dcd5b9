"""Sniffing files for code-bearing contents: what is found, and what must not be."""

from __future__ import annotations

import os
import pickle
import random
import struct
import zipfile

import numpy as np
import pytest

from modelport.registry.content import (
    HEAD_BYTES,
    MAX_MEMBERS,
    is_pickle,
    sniff_bytes,
)
from tests.registry import unsafe_files as uf
from tests.registry.helpers import onnx_bytes


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_a_malicious_pickle_of_any_protocol_is_found(protocol: int) -> None:
    for data in (uf.malicious_pickle(protocol), uf.padded_pickle(protocol)):
        found = sniff_bytes(data)
        assert found is not None and found.kind == "pickle"


def test_a_pickle_behind_a_long_first_argument_is_found() -> None:
    # No protocol marker, and a first opcode whose argument runs far past any head read.
    padding = b"y" * (5 * HEAD_BYTES)
    call = uf.malicious_pickle(0)
    for data in (
        b"B" + struct.pack("<I", len(padding)) + padding + b"0" + call,
        b"\x8e" + struct.pack("<Q", len(padding)) + padding + b"0" + call,
        b"V" + padding + b"\n0" + call,
    ):
        found = sniff_bytes(data)
        assert found is not None and found.kind == "pickle", data[:8]


def test_raw_tensor_data_is_not_taken_for_a_pickle() -> None:
    # Raw float32 weights (ONNX external data) whose first byte is an opcode with a
    # 4-byte length: the length fits in a large file, but what follows is no pickle.
    rng = np.random.default_rng(0)
    for _ in range(100):
        weights = rng.standard_normal(200_000).astype(np.float32).tobytes()
        assert sniff_bytes(b"B" + weights[1:]) is None


def test_pickles_in_the_shapes_model_files_take_are_found() -> None:
    cases = {
        "legacy torch": uf.legacy_torch_file(),
        "torch zip": uf.torch_zip(),
        "torch zip, pickle renamed": uf.torch_zip("archive/weights.bin"),
        "deflated zip": uf.zip_of(
            {"m/state": uf.malicious_pickle()}, compression=zipfile.ZIP_DEFLATED
        ),
        "zip in a zip": uf.zip_of({"inner.zip": uf.torch_zip("x/blob")}),
        "zip after other bytes": b"#!/bin/sh\n" * 20 + uf.torch_zip("x/blob"),
        **{kind: uf.compressed(kind, uf.malicious_pickle()) for kind in ("gzip", "zlib", "bz2")},
        "xz": uf.compressed("xz", uf.malicious_pickle()),
    }
    for name, data in cases.items():
        found = sniff_bytes(data)
        assert found is not None and found.kind == "pickle", name
    member = sniff_bytes(uf.torch_zip())
    assert member is not None and member.member == "archive/data.pkl"
    nested = sniff_bytes(uf.zip_of({"inner.zip": uf.torch_zip("x/blob")}))
    assert nested is not None and nested.member == "inner.zip!x/blob"


def test_numpy_object_arrays_and_keras_lambdas_are_found() -> None:
    objects = np.array([1, "a", None], dtype=object)
    found = sniff_bytes(uf.npy(objects))
    assert found is not None and found.kind == "numpy_object_array"
    npz = uf.zip_of({"a.npy": uf.npy(np.arange(4.0)), "b.npy": uf.npy(objects)})
    found = sniff_bytes(npz)
    assert found is not None and (found.kind, found.member) == ("numpy_object_array", "b.npy")
    found = sniff_bytes(uf.keras_archive(with_lambda=True))
    assert found is not None and (found.kind, found.member) == ("keras_lambda", "config.json")


def test_unreadable_archives_are_refused() -> None:
    broken = uf.torch_zip()[:200]  # starts like a zip, has no central directory
    found = sniff_bytes(broken)
    assert found is not None and found.kind == "unreadable_archive"
    crowded = uf.zip_of({f"m/{i}": b"" for i in range(MAX_MEMBERS + 1)})
    found = sniff_bytes(crowded)
    assert found is not None and found.kind == "unreadable_archive"


def test_every_member_of_an_archive_is_sniffed() -> None:
    members = {f"archive/data/{i}": np.ones(256, np.float32).tobytes() for i in range(500)}
    assert sniff_bytes(uf.zip_of(members)) is None
    members["archive/data/500"] = uf.malicious_pickle()
    found = sniff_bytes(uf.zip_of(members))
    assert found is not None and found.member == "archive/data/500"


def test_safe_contents_pass() -> None:
    safe = {
        "onnx": onnx_bytes(),
        "safetensors": uf.safetensors_file(),
        "npy": uf.npy(np.arange(12.0).reshape(3, 4)),
        "npz": uf.zip_of({"a.npy": uf.npy(np.arange(4))}),
        "keras without lambda": uf.keras_archive(with_lambda=False),
        "gguf": b"GGUF\x03\x00\x00\x00" + bytes(64),
        "labels": b"cat\ndog\ncow\nhen\nbat\n",  # parses as two imports of a pickle
        "json": b'{"labels": ["cat", "dog"]}',
        "gzip of text": uf.compressed("gzip", b"hello\n" * 1000),
        "empty": b"",
    }
    assert uf.safetensors_file()[:2] == b"\x80\x02"
    for name, data in safe.items():
        assert sniff_bytes(data) is None, name


def test_a_pickle_of_plain_data_is_refused_too() -> None:
    for protocol in range(2, pickle.HIGHEST_PROTOCOL + 1):
        found = sniff_bytes(pickle.dumps({"weights": [1.0, 2.0]}, protocol=protocol))
        assert found is not None and found.kind == "pickle", protocol


def test_arbitrary_binary_is_not_taken_for_a_pickle() -> None:
    rng = random.Random(7)
    for _ in range(20_000):
        size = rng.choice([16, 300, HEAD_BYTES + 100])
        data = os.urandom(size)
        if rng.random() < 0.5:  # the worst case: a pickle protocol marker first
            data = bytes([0x80, rng.randint(0, 5)]) + data
        assert not is_pickle(data[:HEAD_BYTES], len(data)), data[:32]
