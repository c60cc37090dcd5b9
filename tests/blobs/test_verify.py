"""Verified reads: corrupted bytes are never handed over whole."""

from __future__ import annotations

from pathlib import Path

import pytest

from modelport.blobs.interface import BlobStore
from modelport.blobs.local import LocalBlobStore
from modelport.blobs.verify import copy_verified, hash_blob, iter_verified
from modelport.errors import Internal, NotFound
from tests.blobs.support import digest_of, new_upload_id, stage

DATA = bytes(range(256)) * 40


def put(store: BlobStore, data: bytes) -> str:
    upload_id = new_upload_id()
    stage(store, upload_id, 0, data)
    store.commit_staging(upload_id, digest_of(data), len(data))
    return digest_of(data)


def corrupt(store: LocalBlobStore, digest: str, at: int = 100) -> None:
    path = store.path(digest)
    raw = bytearray(path.read_bytes())
    raw[at] ^= 0xFF
    path.write_bytes(bytes(raw))


@pytest.fixture
def local(tmp_path: Path) -> LocalBlobStore:
    store = LocalBlobStore(tmp_path / "blobs")
    store.chunk_size = 1000
    return store


def test_a_sound_blob_streams_whole(store: BlobStore) -> None:
    digest = put(store, DATA)
    assert b"".join(iter_verified(store, digest, len(DATA))) == DATA
    assert hash_blob(store, digest) == (digest, len(DATA))


def test_a_corrupted_blob_is_cut_off_before_its_last_chunk(local: LocalBlobStore) -> None:
    digest = put(local, DATA)
    corrupt(local, digest)
    received = bytearray()
    with pytest.raises(Internal) as info:
        for chunk in iter_verified(local, digest):
            received += chunk
    assert info.value.code == "blob_corrupted"
    assert len(received) < len(DATA)


def test_a_recorded_size_that_differs_is_corruption(local: LocalBlobStore) -> None:
    digest = put(local, DATA)
    with pytest.raises(Internal) as info:
        list(iter_verified(local, digest, len(DATA) + 1))
    assert info.value.code == "blob_corrupted"


def test_a_missing_blob_fails_at_once(local: LocalBlobStore) -> None:
    with pytest.raises(NotFound) as info:
        iter_verified(local, digest_of(b"absent"))
    assert info.value.code == "blob_not_found"


def test_copy_verified_writes_the_file(store: BlobStore, tmp_path: Path) -> None:
    digest = put(store, DATA)
    dest = tmp_path / "out" / "model.onnx"
    copy_verified(store, digest, dest)
    assert dest.read_bytes() == DATA


def test_copy_verified_leaves_nothing_on_corruption(local: LocalBlobStore, tmp_path: Path) -> None:
    digest = put(local, DATA)
    corrupt(local, digest)
    dest = tmp_path / "out" / "model.onnx"
    with pytest.raises(Internal) as info:
        copy_verified(local, digest, dest)
    assert info.value.code == "blob_corrupted"
    assert list(dest.parent.iterdir()) == []
