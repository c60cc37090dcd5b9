"""Batch files read a shard at a time (``jobs.readers``), on the local and the S3 blob
store: a ``.npy`` shard by a ranged read of its rows alone, a JSON Lines shard from the
file's first chunks, both counted by a store that tallies every byte it hands out."""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from modelport.blobs.interface import BlobStore, StagingWriter
from modelport.blobs.service import BlobService
from modelport.blobs.types import StagedUpload
from modelport.digests import sha256_digest
from modelport.errors import InvalidInput
from modelport.files.batch_lines import iter_lines, iter_stream_lines
from modelport.jobs.readers import NpyRows, first_line, jsonl_shards
from modelport.store import Database, create_database
from tests.blobs.conftest import s3_bucket, s3_endpoint, s3_env, store

__all__ = ["s3_bucket", "s3_endpoint", "s3_env", "store"]  # the fixtures


class CountingStore(BlobStore):
    """A store that counts the bytes its reads hand out, and the ranges asked."""

    def __init__(self, inner: BlobStore, chunk_size: int = 4096) -> None:
        self.inner = inner
        self.inner.chunk_size = chunk_size
        self.bytes_read = 0
        self.ranges: list[tuple[int, int | None]] = []

    def size(self, digest: str) -> int | None:
        return self.inner.size(digest)

    def read(self, digest: str, start: int = 0, end: int | None = None) -> Iterator[bytes]:
        self.ranges.append((start, end))
        chunks = self.inner.read(digest, start, end)

        def counted() -> Iterator[bytes]:
            for chunk in chunks:
                self.bytes_read += len(chunk)
                yield chunk

        return counted()

    def delete(self, digest: str) -> None:
        self.inner.delete(digest)

    def open_staging(self, upload_id: str, offset: int) -> StagingWriter:
        return self.inner.open_staging(upload_id, offset)

    def commit_staging(self, upload_id: str, digest: str, size: int) -> bool:
        return self.inner.commit_staging(upload_id, digest, size)

    def discard_staging(self, upload_id: str) -> None:
        self.inner.discard_staging(upload_id)

    def staged_uploads(self) -> Iterator[StagedUpload]:
        return self.inner.staged_uploads()


@pytest.fixture
def database(database_url: str) -> Iterator[Database]:
    db = create_database(database_url)
    yield db
    db.dispose()


def _counted(
    database: Database, store: BlobStore, verify_below: int = 0
) -> tuple[BlobService, CountingStore]:
    counting = CountingStore(store)
    return BlobService(database, counting, verify_below_bytes=verify_below), counting


def _npy(array: np.ndarray) -> bytes:
    out = io.BytesIO()
    np.save(out, array, allow_pickle=True)
    return out.getvalue()


def test_a_npy_shard_is_read_by_range_without_the_rest_of_the_file(
    database: Database, store: BlobStore
) -> None:
    blobs, counting = _counted(database, store)
    rows = np.arange(20_000 * 8, dtype=np.float32).reshape(20_000, 8)
    data = _npy(rows)
    digest = blobs.put(data)
    counting.bytes_read, counting.ranges = 0, []

    reader = NpyRows.open(blobs, digest)
    assert (reader.rows, reader.shape, reader.dtype) == (20_000, (20_000, 8), np.float32)
    header = counting.bytes_read
    assert header < 256  # the magic, the length and the header: nothing of the rows
    shard = reader.read(12_000, 12_100)
    np.testing.assert_array_equal(shard, rows[12_000:12_100])
    assert counting.bytes_read - header == 100 * 8 * 4  # that shard's rows, and only them
    assert counting.bytes_read < len(data) // 100
    assert counting.ranges[-1] == (reader.offset + 12_000 * 32, reader.offset + 12_100 * 32)
    # The last shard is clipped to the file; a shard's rows are writable (a copy).
    tail = reader.read(19_990, 20_500)
    np.testing.assert_array_equal(tail, rows[19_990:])
    tail[0, 0] = -1.0


def test_a_small_npy_file_is_verified_once_not_per_shard(
    database: Database, store: BlobStore
) -> None:
    blobs, counting = _counted(database, store, verify_below=1 << 30)
    rows = np.arange(1000 * 4, dtype=np.int64).reshape(1000, 4)
    data = _npy(rows)
    digest = blobs.put(data)
    counting.bytes_read = 0
    reader = NpyRows.open(blobs, digest)
    hashed = counting.bytes_read
    assert hashed >= len(data)  # hashed once, when opened
    parts = [reader.read(start, start + 100) for start in range(0, 1000, 100)]
    np.testing.assert_array_equal(np.concatenate(parts), rows)
    assert counting.bytes_read - hashed < len(data) + 2 * 256  # each row once, no re-hash


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"not a numpy file at all", "no .npy magic"),
        (_npy(np.array([{"a": 1}, {"b": 2}], dtype=object)), "object data"),
        (_npy(np.asfortranarray(np.ones((3, 4), dtype=np.float32))), "Fortran order"),
        (_npy(np.ones((4, 4), dtype=np.float32))[:-10], "fewer than 4 rows"),
        (_npy(np.zeros((0, 4), dtype=np.float32)), "no rows"),
        (_npy(np.float32(3.0)), "no rows"),
    ],
)
def test_files_that_are_not_npy_rows_are_refused(
    database: Database, store: BlobStore, data: bytes, problem: str
) -> None:
    blobs, _ = _counted(database, store)
    digest = blobs.put(data)
    with pytest.raises(InvalidInput) as refused:
        NpyRows.open(blobs, digest)
    assert refused.value.code == "invalid_batch_file" and problem in refused.value.message


def _jsonl(rows: int) -> bytes:
    lines = [
        json.dumps(
            {
                "custom_id": f"r{i}",
                "method": "POST",
                "url": "/v1/embeddings",
                "body": {"model": "acme/e", "input": "x" * 60},
            }
        )
        for i in range(rows)
    ]
    lines.insert(5, "   ")  # a blank line is skipped, and still counted in line numbers
    return "\n".join(lines).encode() + b"\n"


def test_a_jsonl_file_is_read_a_shard_at_a_time(database: Database, store: BlobStore) -> None:
    blobs, counting = _counted(database, store)
    data = _jsonl(3000)
    digest = blobs.put(data)
    counting.bytes_read = 0
    shards = jsonl_shards(blobs, digest, 10)
    first = next(shards)
    assert [line.custom_id for line in first.lines] == [f"r{i}" for i in range(10)]
    # Ten lines and at most two chunks past them (the verifying stream holds one chunk
    # back until it has the next): not the file.
    assert counting.bytes_read <= len(b"\n".join(data.split(b"\n")[:11])) + 2 * 4096
    assert counting.bytes_read < len(data) // 20
    shards.close()

    skipped = list(jsonl_shards(blobs, digest, 1000, skip={0, 2}))
    assert [(s.position, s.rows, len(s.lines)) for s in skipped] == [
        (0, 1000, 0),
        (1, 1000, 1000),
        (2, 1000, 0),
    ]
    assert skipped[1].lines[0].custom_id == "r1000"
    found = first_line(blobs, digest)
    assert found is not None and found.custom_id == "r0"


def test_a_bad_line_is_named_by_its_number_in_the_file(
    database: Database, store: BlobStore
) -> None:
    blobs, _ = _counted(database, store)
    data = _jsonl(30).replace(b'"custom_id": "r20"', b'"custom_id": 20')
    digest = blobs.put(data)
    shards = jsonl_shards(blobs, digest, 10)
    assert next(shards).rows == 10 and next(shards).rows == 10
    with pytest.raises(InvalidInput) as refused:
        next(shards)
    assert refused.value.code == "invalid_batch_file"
    assert refused.value.message.startswith("line 22 of the batch file")  # a blank line 6


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 64, 1 << 20])
@pytest.mark.parametrize(
    "data", [b"a\n\nbb\n  \nccc\r\nd", b"one\ntwo\n", b"\n\n\nx", b"", b"abcdef"]
)
def test_streamed_lines_are_the_lines_of_the_whole(chunk: int, data: bytes) -> None:
    pieces: list[Any] = [data[i : i + chunk] for i in range(0, len(data), chunk)]
    assert list(iter_stream_lines(pieces)) == list(iter_lines(data))
    assert list(iter_stream_lines([])) == []


@pytest.mark.parametrize("chunk", [1, 3, 5, 1 << 20])
def test_a_line_past_the_bound_is_refused_by_its_number(chunk: int) -> None:
    data = b"ok\n\n" + b"x" * 9 + b"\nrest\n"
    pieces = [data[i : i + chunk] for i in range(0, len(data), chunk)]
    lines = iter_stream_lines(pieces, max_line=8)
    assert next(lines) == (1, b"ok")
    with pytest.raises(InvalidInput) as refused:
        next(lines)
    assert refused.value.code == "invalid_batch_file"
    assert refused.value.message.startswith("line 3 of the batch file: longer than 8 bytes")
    with pytest.raises(InvalidInput) as whole:  # the upload's check refuses it alike
        list(iter_lines(data, max_line=8))
    assert whole.value.message == refused.value.message
    assert list(iter_stream_lines(pieces, max_line=9)) == list(iter_lines(data, max_line=9))


def test_a_line_that_never_ends_is_refused_before_it_is_held() -> None:
    handed = 0

    def endless() -> Iterator[bytes]:
        nonlocal handed
        yield b'{"custom_id": "a"}\n'
        while True:
            handed += 1
            yield b"x" * 1000

    lines = iter_stream_lines(endless(), max_line=10_000)
    assert next(lines)[0] == 1
    with pytest.raises(InvalidInput) as refused:
        next(lines)
    assert refused.value.message.startswith("line 2 of the batch file")
    assert handed == 11  # the bound and one chunk past it, no more


def test_a_blob_written_from_pieces_is_the_blob_of_their_bytes(
    database: Database, store: BlobStore
) -> None:
    blobs, _ = _counted(database, store)
    pieces = [b"first line\n", b"", b"second", b" line\n" * 1000]
    joined = b"".join(pieces)
    blob = blobs.put_chunks(iter(pieces), tenant="acme")
    assert (blob.digest, blob.size) == (sha256_digest(joined), len(joined))
    assert blobs.get(blob.digest) == joined and blobs.held_by("acme", blob.digest)
    again = blobs.put_chunks(iter(pieces), tenant="beta")  # stored already: recorded only
    assert again == blob and blobs.held_by("beta", blob.digest)
    empty = blobs.put_chunks(iter([]))
    assert empty.size == 0 and blobs.get(empty.digest) == b""


def _pieces(count: int, size: int = 1 << 16) -> Iterator[bytes]:
    rng = np.random.default_rng(5)
    for _ in range(count):
        yield rng.bytes(size)


def test_a_streamed_write_bigger_than_a_multipart_part_is_stored_whole(
    database: Database, store: BlobStore
) -> None:
    blobs, _ = _counted(database, store)
    count = 176  # 11 MiB: three parts of the S3 store's multipart upload
    blob = blobs.put_chunks(_pieces(count), tenant="acme")
    hasher = hashlib.sha256()
    for piece in _pieces(count):
        hasher.update(piece)
    assert blob.digest == "sha256:" + hasher.hexdigest() and blob.size == count << 16
    read = hashlib.sha256()
    for chunk in blobs.read(blobs.stat(blob.digest)):
        read.update(chunk)
    assert read.hexdigest() == hasher.hexdigest()


def test_a_streamed_write_broken_off_stores_and_stages_nothing(
    database: Database, store: BlobStore
) -> None:
    blobs, _ = _counted(database, store)

    def broken() -> Iterator[bytes]:
        yield from _pieces(96)  # 6 MiB, then the producer fails
        raise RuntimeError("the encoder failed")

    with pytest.raises(RuntimeError):
        blobs.put_chunks(broken(), tenant="acme")
    assert list(store.staged_uploads()) == []
    prefix = hashlib.sha256(b"".join(_pieces(96))).hexdigest()
    assert store.size("sha256:" + prefix) is None
