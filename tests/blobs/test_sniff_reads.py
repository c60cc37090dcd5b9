"""Sniffing a stored blob for code-bearing contents reads only parts of it, by ranges,
on every store."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from modelport.blobs import BlobStore
from modelport.registry.content import find_unsafe
from tests.registry import unsafe_files as uf
from tests.registry.helpers import onnx_bytes, put_blob


@pytest.fixture
def counted(store: BlobStore, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Bytes each read of ``store`` returned."""
    reads: list[int] = []
    real = store.read

    def read(digest: str, start: int = 0, end: int | None = None) -> Iterator[bytes]:
        chunks = list(real(digest, start, end))
        reads.append(sum(map(len, chunks)))
        return iter(chunks)

    monkeypatch.setattr(store, "read", read)
    return reads


def test_a_zip_at_the_end_of_a_large_blob_is_found_by_ranged_reads(
    store: BlobStore, counted: list[int]
) -> None:
    big = onnx_bytes() + bytes(8 << 20) + uf.torch_zip("x/blob")
    digest = put_blob(store, big)
    counted.clear()
    found = find_unsafe(store, digest, len(big))
    assert found is not None and (found.kind, found.member) == ("pickle", "x/blob")
    assert sum(counted) < 512 * 1024

    clean = onnx_bytes() + bytes(8 << 20)
    digest = put_blob(store, clean)
    counted.clear()
    assert find_unsafe(store, digest, len(clean)) is None
    assert sum(counted) < 512 * 1024
