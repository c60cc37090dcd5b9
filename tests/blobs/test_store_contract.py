"""The BlobStore contract, run against the local folder store and the S3 store alike."""

from __future__ import annotations

import os

import pytest

from modelport.blobs.interface import BlobStore
from modelport.blobs.local import LocalBlobStore
from modelport.errors import Internal, InvalidInput, NotFound
from tests.blobs.support import digest_of, new_upload_id, read_all, stage

MISSING = digest_of(b"never stored")


def staged_ids(store: BlobStore) -> set[str]:
    return {s.upload_id for s in store.staged_uploads()}


class TestCommittedBlobs:
    def test_missing_blob_has_no_size_and_cannot_be_read(self, store: BlobStore) -> None:
        assert store.size(MISSING) is None
        with pytest.raises(NotFound) as info:
            store.read(MISSING)
        assert info.value.code == "blob_not_found"

    def test_delete_of_a_missing_blob_is_quiet(self, store: BlobStore) -> None:
        store.delete(MISSING)
        assert store.size(MISSING) is None

    def test_reads_stream_whole_blobs_and_ranges(self, store: BlobStore) -> None:
        data = os.urandom(3 * store.chunk_size + 123)
        upload_id = new_upload_id()
        stage(store, upload_id, 0, data)
        assert store.commit_staging(upload_id, digest_of(data), len(data))
        digest = digest_of(data)
        assert store.size(digest) == len(data)
        chunks = list(store.read(digest))
        assert b"".join(chunks) == data
        assert max(len(c) for c in chunks) <= store.chunk_size
        assert read_all(store, digest, 10, 20) == data[10:20]
        assert read_all(store, digest, len(data) - 5) == data[-5:]
        assert read_all(store, digest, 7, 7) == b""

    def test_delete_removes_a_blob(self, store: BlobStore) -> None:
        upload_id = new_upload_id()
        stage(store, upload_id, 0, b"bye")
        store.commit_staging(upload_id, digest_of(b"bye"), 3)
        store.delete(digest_of(b"bye"))
        assert store.size(digest_of(b"bye")) is None


class TestStaging:
    def test_chunks_of_any_size_commit_in_order(self, store: BlobStore) -> None:
        # Uneven chunks, some smaller than an S3 part and one larger, exercise assembly.
        sizes = [1, 3 << 20, 7, (6 << 20) + 5, 2 << 20, 0, 11]
        data = os.urandom(sum(sizes))
        upload_id = new_upload_id()
        offset = 0
        for size in sizes:
            stage(store, upload_id, offset, data[offset : offset + size])
            offset += size
        assert store.commit_staging(upload_id, digest_of(data), len(data)) is True
        assert read_all(store, digest_of(data)) == data

    def test_an_empty_blob(self, store: BlobStore) -> None:
        upload_id = new_upload_id()
        assert store.commit_staging(upload_id, digest_of(b""), 0) is True
        assert store.size(digest_of(b"")) == 0
        assert read_all(store, digest_of(b"")) == b""

    def test_wrong_digest_stores_nothing_and_keeps_the_staged_bytes(self, store: BlobStore) -> None:
        upload_id = new_upload_id()
        stage(store, upload_id, 0, b"payload")
        with pytest.raises(InvalidInput) as info:
            store.commit_staging(upload_id, digest_of(b"other"), 7)
        assert info.value.code == "digest_mismatch"
        assert info.value.extra["actual"] == digest_of(b"payload")
        assert store.size(digest_of(b"other")) is None
        assert store.size(digest_of(b"payload")) is None
        # The client may still commit with the right digest.
        assert store.commit_staging(upload_id, digest_of(b"payload"), 7)
        assert read_all(store, digest_of(b"payload")) == b"payload"

    def test_only_the_first_size_bytes_are_committed(self, store: BlobStore) -> None:
        # A chunk published by a transaction that then failed lies past the recorded size.
        upload_id = new_upload_id()
        stage(store, upload_id, 0, b"abc")
        stage(store, upload_id, 3, b"leftover")
        assert store.commit_staging(upload_id, digest_of(b"abc"), 3)
        assert read_all(store, digest_of(b"abc")) == b"abc"

    def test_a_republished_offset_replaces_the_leftover(self, store: BlobStore) -> None:
        upload_id = new_upload_id()
        stage(store, upload_id, 0, b"abc")
        stage(store, upload_id, 3, b"leftover-from-a-failed-publish")
        stage(store, upload_id, 3, b"def")
        assert store.commit_staging(upload_id, digest_of(b"abcdef"), 6)
        assert read_all(store, digest_of(b"abcdef")) == b"abcdef"

    def test_an_aborted_chunk_leaves_nothing(self, store: BlobStore) -> None:
        upload_id = new_upload_id()
        stage(store, upload_id, 0, b"kept")
        writer = store.open_staging(upload_id, 4)
        writer.write(b"dropped")
        writer.abort()
        writer.abort()  # idempotent
        with pytest.raises(Internal) as info:
            store.commit_staging(upload_id, digest_of(b"keptdropped"), 11)
        assert info.value.code == "staging_lost"
        assert store.commit_staging(upload_id, digest_of(b"kept"), 4)

    def test_fewer_staged_bytes_than_recorded_is_reported(self, store: BlobStore) -> None:
        upload_id = new_upload_id()
        stage(store, upload_id, 0, b"short")
        with pytest.raises(Internal) as info:
            store.commit_staging(upload_id, digest_of(b"shorter"), 7)
        assert info.value.code == "staging_lost"
        assert store.size(digest_of(b"shorter")) is None

    def test_committing_a_stored_blob_again_writes_nothing(self, store: BlobStore) -> None:
        first, second = new_upload_id(), new_upload_id()
        stage(store, first, 0, b"same bytes")
        assert store.commit_staging(first, digest_of(b"same bytes"), 10) is True
        stage(store, second, 0, b"same bytes")
        assert store.commit_staging(second, digest_of(b"same bytes"), 10) is False
        assert read_all(store, digest_of(b"same bytes")) == b"same bytes"

    def test_discard_drops_staged_bytes(self, store: BlobStore) -> None:
        kept, dropped = new_upload_id(), new_upload_id()
        stage(store, kept, 0, b"one")
        stage(store, dropped, 0, b"two")
        assert staged_ids(store) == {kept, dropped}
        store.discard_staging(dropped)
        store.discard_staging(dropped)  # idempotent
        assert staged_ids(store) == {kept}
        with pytest.raises(Internal):
            store.commit_staging(dropped, digest_of(b"two"), 3)

    @pytest.mark.parametrize("bad", ["../../etc", "short", "a/b" * 10, ""])
    def test_upload_ids_cannot_escape_staging(self, store: BlobStore, bad: str) -> None:
        with pytest.raises(NotFound) as info:
            store.open_staging(bad, 0)
        assert info.value.code == "upload_not_found"


def test_local_dedup_does_not_rewrite_the_file(tmp_path) -> None:
    store = LocalBlobStore(tmp_path / "blobs")
    data = b"x" * 1000
    first, second = new_upload_id(), new_upload_id()
    stage(store, first, 0, data)
    store.commit_staging(first, digest_of(data), len(data))
    before = store.path(digest_of(data)).stat()
    stage(store, second, 0, data)
    assert store.commit_staging(second, digest_of(data), len(data)) is False
    after = store.path(digest_of(data)).stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_local_layout_is_content_addressed(tmp_path) -> None:
    store = LocalBlobStore(tmp_path / "blobs")
    upload_id = new_upload_id()
    stage(store, upload_id, 0, b"hello")
    store.commit_staging(upload_id, digest_of(b"hello"), 5)
    hex_digits = digest_of(b"hello").split(":")[1]
    path = tmp_path / "blobs" / "sha256" / hex_digits[:2] / hex_digits
    assert path.read_bytes() == b"hello"
