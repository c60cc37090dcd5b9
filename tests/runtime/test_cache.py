"""The content-addressed model cache: verified copies, re-verified hits, corruption."""

from __future__ import annotations

from pathlib import Path

import pytest

from modelport.digests import sha256_digest
from modelport.errors import Unavailable
from modelport.manifest import Manifest, manifest_digest
from modelport.runtime.cache import ModelCache
from tests.runtime.conftest import DictBlobSource


def two_file_manifest(source: DictBlobSource) -> Manifest:
    weights, graph = b"w" * 10_000, b"graph bytes"
    files = [
        {"path": "model.onnx", "digest": source.add(graph), "size": len(graph)},
        {"path": "data/weights.bin", "digest": source.add(weights), "size": len(weights)},
    ]
    return Manifest.model_validate(
        {
            "format": "onnx",
            "files": files,
            "inputs": [{"name": "x", "datatype": "FP32", "shape": [-1]}],
            "outputs": [{"name": "y", "datatype": "FP32", "shape": [-1]}],
            "license": "MIT",
        }
    )


def test_files_are_fetched_verified_and_laid_out_by_path(tmp_path: Path) -> None:
    source = DictBlobSource()
    manifest = two_file_manifest(source)
    cache = ModelCache(tmp_path)
    got = cache.materialize(manifest, manifest_digest(manifest), source)
    assert got.files["model.onnx"].read_bytes() == b"graph bytes"
    assert got.files["data/weights.bin"].read_bytes() == b"w" * 10_000
    # Side files sit beside the entrypoint under their manifest paths.
    assert got.files["data/weights.bin"].parent.parent == got.files["model.onnx"].parent
    assert got.fetched_bytes == 10_011 and got.cached_bytes == 0
    digest = manifest.files[1].digest
    assert cache.blob_path(digest).read_bytes() == b"w" * 10_000
    assert not list(tmp_path.rglob(".fetch-*"))


def test_a_cache_hit_is_hashed_again_but_not_refetched(tmp_path: Path) -> None:
    source = DictBlobSource()
    manifest = two_file_manifest(source)
    cache = ModelCache(tmp_path)
    cache.materialize(manifest, manifest_digest(manifest), source)
    again = cache.materialize(manifest, manifest_digest(manifest), source)
    assert again.fetched_bytes == 0 and again.cached_bytes == 10_011
    assert again.verify_seconds > 0
    assert all(n == 1 for n in source.reads.values())


def test_a_damaged_cache_copy_is_replaced_from_the_source(tmp_path: Path) -> None:
    source = DictBlobSource()
    manifest = two_file_manifest(source)
    cache = ModelCache(tmp_path)
    first = cache.materialize(manifest, manifest_digest(manifest), source)
    blob = cache.blob_path(manifest.files[1].digest)
    blob.write_bytes(b"x" * 10_000)  # same size, other bytes
    again = cache.materialize(manifest, manifest_digest(manifest), source)
    assert again.fetched_bytes == 10_000
    assert again.files["data/weights.bin"].read_bytes() == b"w" * 10_000
    assert first.files["data/weights.bin"] == again.files["data/weights.bin"]


@pytest.mark.parametrize("damage", [b"corrupted!!", b"short", b"graph bytes plus more"])
def test_a_corrupted_blob_in_the_source_fails_and_nothing_is_cached(
    tmp_path: Path, damage: bytes
) -> None:
    source = DictBlobSource()
    manifest = two_file_manifest(source)
    source.blobs[manifest.files[0].digest] = damage
    cache = ModelCache(tmp_path)
    with pytest.raises(Unavailable) as info:
        cache.materialize(manifest, manifest_digest(manifest), source)
    assert info.value.code == "blob_corrupted"
    assert "model.onnx" in info.value.message
    assert not cache.blob_path(manifest.files[0].digest).exists()
    assert not list(tmp_path.rglob(".fetch-*"))


def test_a_missing_blob_fails(tmp_path: Path) -> None:
    source = DictBlobSource()
    manifest = two_file_manifest(source)
    del source.blobs[manifest.files[1].digest]
    with pytest.raises(Unavailable) as info:
        ModelCache(tmp_path).materialize(manifest, manifest_digest(manifest), source)
    assert info.value.code == "blob_missing"


def test_two_paths_with_the_same_content_share_one_blob(tmp_path: Path) -> None:
    source = DictBlobSource()
    data = b"same"
    digest = source.add(data)
    manifest = Manifest.model_validate(
        {
            "format": "onnx",
            "files": [
                {"path": "a.bin", "digest": digest, "size": 4},
                {"path": "b.bin", "digest": digest, "size": 4},
            ],
            "inputs": [{"name": "x", "datatype": "FP32", "shape": [-1]}],
            "outputs": [{"name": "y", "datatype": "FP32", "shape": [-1]}],
            "license": "MIT",
        }
    )
    got = ModelCache(tmp_path).materialize(manifest, sha256_digest(b"m"), source)
    assert got.files["a.bin"].read_bytes() == got.files["b.bin"].read_bytes() == data
    assert source.reads[digest] == 1


def test_concurrent_loads_of_one_manifest_share_its_view(tmp_path: Path) -> None:
    """Two versions with identical manifests (or two loads of one) may build the same
    view at once; every one of them gets intact files."""
    import threading

    source = DictBlobSource()
    manifest = two_file_manifest(source)
    cache = ModelCache(tmp_path)
    digest = manifest_digest(manifest)
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)

    def load() -> None:
        barrier.wait()
        try:
            for _ in range(20):
                got = cache.materialize(manifest, digest, source)
                assert got.files["model.onnx"].read_bytes() == b"graph bytes"
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=load) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert not list(tmp_path.rglob(".link-*"))
