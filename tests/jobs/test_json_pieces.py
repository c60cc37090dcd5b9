"""The pieces big stage outputs are made of: ``tensors.dump_chunks`` writes what
``tensors.dumps`` writes, and ``JsonSpans`` finds the values of a stored document
however its bytes fall into the store's chunks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from modelport.blobs.local import LocalBlobStore
from modelport.blobs.service import BlobRanges
from modelport.blobs.types import Blob
from modelport.errors import InvalidInput
from modelport.jobs import tensors
from modelport.jobs.jsonspans import JsonSpans
from tests.registry.helpers import put_blob

RNG = np.random.default_rng(3)
ARRAYS = {
    "fp32": RNG.standard_normal((70, 5)).astype(np.float32),
    "fp16": RNG.standard_normal(9).astype(np.float16),
    "fp64": np.array([np.nan, np.inf, -np.inf, 1e300, 5e-324, 0.1, -0.0, 1e16, 3.0]),
    "int64": np.array([[-(2**63), 2**63 - 1], [0, 1]], dtype=np.int64),
    "uint64": np.array([2**64 - 1, 0], dtype=np.uint64),
    "uint8": np.arange(200, dtype=np.uint8).reshape(10, 20),
    "bool": np.array([True, False, True]),
    "bytes": np.array([b"a", b"\xff\xfe", "é".encode(), b'"[{\\'], dtype=object),
    "empty": np.zeros((0, 3), dtype=np.float32),
    "scalar": np.array(3.5, dtype=np.float32),
    # More than one slice, and not contiguous: each slice is copied alone.
    "strided": RNG.standard_normal((40_000, 3)).astype(np.float32)[:, ::2],
}


@pytest.mark.parametrize("name", sorted(ARRAYS))
def test_dump_chunks_writes_the_bytes_dumps_writes(name: str) -> None:
    array = ARRAYS[name]
    extra = {"model": "m", "z": {"b": 1, "a": [1, "x"]}, "none": None}
    whole = tensors.dumps({**extra, "outputs": [tensors.encode_tensor(name, array)]})
    pieces = list(tensors.dump_chunks({**extra, "outputs": [tensors.streamed_tensor(name, array)]}))
    assert b"".join(pieces) == whole
    assert max(len(p) for p in pieces) <= tensors.CHUNK_BYTES + (1 << 20)


def test_verbatim_text_is_copied_as_it_is() -> None:
    doc = {"b": tensors.Verbatim(lambda: iter([b"[1,", b"2]"])), "a": 1}
    assert b"".join(tensors.dump_chunks(doc)) == b'{"a":1,"b":[1,2]}'


def _spans(tmp_path: Path, text: bytes, chunk: int = 3) -> JsonSpans:
    store = LocalBlobStore(tmp_path / "blobs")
    store.chunk_size = chunk  # every boundary falls somewhere awkward
    digest = put_blob(store, text)
    return JsonSpans(BlobRanges(store, Blob(digest, len(text))))


DOCUMENT: dict[str, Any] = {
    'a "quoted" [key]': 'a string with ] } , [ { and \\ and " inside',
    "nested": {"x": [[1, 2], [3, [4, {"y": "]"}]]], "e": {}, "f": []},
    "outputs": [
        {"name": "y", "data": [1.5, -2, 3e-7], "shape": [3]},
        {"name": "ünï", "data": ["\\", '"', "]"], "shape": [3]},
    ],
    "empty": [],
    "n": None,
}


@pytest.mark.parametrize("indent", [False, True])
@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 1 << 20])
def test_spans_find_every_value_across_chunk_boundaries(
    tmp_path: Path, indent: bool, chunk: int
) -> None:
    text = orjson.dumps(DOCUMENT, option=orjson.OPT_INDENT_2 if indent else 0)
    doc = _spans(tmp_path, text, chunk)
    top = doc.object(doc.whole)
    assert list(top) == list(DOCUMENT)
    assert {key: doc.load(span) for key, span in top.items()} == DOCUMENT
    items = doc.array(top["outputs"])
    assert [doc.load(item) for item in items] == DOCUMENT["outputs"]
    assert [doc.load(doc.object(item)["name"]) for item in items] == ["y", "ünï"]
    assert doc.array(top["empty"]) == [] and doc.object(doc.object(top["nested"])["e"]) == {}
    data = doc.object(items[1])["data"]
    assert orjson.loads(b"".join(doc.stream(data))) == ["\\", '"', "]"]


@pytest.mark.parametrize(
    "text",
    [
        b'{"outputs": [1, 2',  # cut short
        b'"just a string"',
        b"42",
        b"[1, 2]",  # an array where an object is asked for
        b'{"a" 1}',
        b"{1: 2}",
        b'{"a": tru}',
        b"",
    ],
)
def test_malformed_documents_are_refused(tmp_path: Path, text: bytes) -> None:
    doc = _spans(tmp_path, text)
    with pytest.raises(InvalidInput) as caught:
        top = doc.object(doc.whole)
        for span in top.values():
            doc.load(span)
    assert caught.value.code == "invalid_job_input"
