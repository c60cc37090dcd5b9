"""A local, content-addressed cache of model files.

A version's blobs are copied from a ``BlobSource`` into ``root/sha256/ab/<hex>``,
hashed while they are copied (temporary file, then an atomic rename), and then laid
out under their manifest paths in ``root/views/<manifest hex>/`` (hard links) so that
formats with side files (ONNX external data) find them by relative path.

A cache hit is not a trust decision: a cached file is hashed again before use, and
the cost of doing so is reported separately (the ``verify`` phase). A cached copy
that no longer matches is removed and fetched again; bytes from the source that do
not match their digest fail the load (code ``blob_corrupted``) and nothing is kept.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from modelport.digests import hex_part
from modelport.errors import Unavailable
from modelport.ids import unique_id
from modelport.manifest import FileEntry, Manifest

_HASH_CHUNK = 1 << 20


class BlobSource(Protocol):
    """Where a version's blobs come from; ``modelport.blobs.BlobStore`` satisfies it."""

    def size(self, digest: str) -> int | None:
        """Stored size of a blob, or None if it is not stored."""
        ...

    def read(self, digest: str, start: int = 0, end: int | None = None) -> Iterator[bytes]:
        """Stream bytes ``[start, end)`` of a stored blob."""
        ...


@dataclass(frozen=True)
class CachedFiles:
    """A version's files, verified, by manifest path."""

    files: dict[str, Path]
    fetch_seconds: float
    """Copying missing blobs from the source (hashed as they are copied)."""
    verify_seconds: float
    """Re-hashing blobs that were already cached."""
    fetched_bytes: int
    cached_bytes: int


class ModelCache:
    """Content-addressed model files under ``root``. Safe for concurrent loads."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def blob_path(self, digest: str) -> Path:
        hex_digest = hex_part(digest)
        return self.root / "sha256" / hex_digest[:2] / hex_digest

    def materialize(
        self, manifest: Manifest, manifest_digest: str, source: BlobSource
    ) -> CachedFiles:
        """Make every file of ``manifest`` present and verified locally; return their paths."""
        fetch_seconds = verify_seconds = 0.0
        fetched_bytes = cached_bytes = 0
        blobs: dict[str, Path] = {}
        for entry in manifest.files:
            if entry.digest in blobs:
                continue
            path = self.blob_path(entry.digest)
            if path.exists():
                started = time.perf_counter()
                intact = _file_matches(path, entry)
                verify_seconds += time.perf_counter() - started
                if intact:
                    cached_bytes += entry.size
                    blobs[entry.digest] = path
                    continue
                # A damaged cache copy is not the source's fault: drop it and fetch again.
                path.unlink(missing_ok=True)
            started = time.perf_counter()
            self._fetch(entry, source, path)
            fetch_seconds += time.perf_counter() - started
            fetched_bytes += entry.size
            blobs[entry.digest] = path
        files = self._view(manifest, manifest_digest, blobs)
        return CachedFiles(files, fetch_seconds, verify_seconds, fetched_bytes, cached_bytes)

    def _fetch(self, entry: FileEntry, source: BlobSource, path: Path) -> None:
        if source.size(entry.digest) is None:
            raise Unavailable(
                f"file '{entry.path}' ({entry.digest}) is not in the blob store",
                code="blob_missing",
            )
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=".fetch-")
        tmp = Path(tmp_name)
        try:
            hasher = hashlib.sha256()
            size = 0
            with os.fdopen(fd, "wb") as out:
                for chunk in source.read(entry.digest):
                    hasher.update(chunk)
                    size += len(chunk)
                    if size > entry.size:
                        break
                    out.write(chunk)
            got = "sha256:" + hasher.hexdigest()
            if size != entry.size or got != entry.digest:
                raise Unavailable(
                    f"file '{entry.path}' is corrupted in the blob store: expected "
                    f"{entry.digest} ({entry.size} bytes), read {got} ({size} bytes)",
                    code="blob_corrupted",
                    path=entry.path,
                )
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)

    def _view(
        self, manifest: Manifest, manifest_digest: str, blobs: dict[str, Path]
    ) -> dict[str, Path]:
        view = self.root / "views" / hex_part(manifest_digest)
        files: dict[str, Path] = {}
        for entry in manifest.files:
            target = view / entry.path
            blob = blobs[entry.digest]
            if not _same_file(target, blob):
                target.parent.mkdir(parents=True, exist_ok=True)
                # Unique per call: two loads of one manifest may build its view at once.
                tmp = target.with_name(f".link-{unique_id()}-{target.name}")
                try:
                    try:
                        os.link(blob, tmp)
                    except OSError:  # no hard links here (another filesystem): point at the blob
                        tmp.symlink_to(blob)
                    os.replace(tmp, target)
                finally:
                    # rename(2) leaves both names when they are links to one inode already
                    tmp.unlink(missing_ok=True)
            files[entry.path] = target
        return files


def _file_matches(path: Path, entry: FileEntry) -> bool:
    hasher = hashlib.sha256()
    size = 0
    with path.open("rb") as handle:
        while chunk := handle.read(_HASH_CHUNK):
            hasher.update(chunk)
            size += len(chunk)
    return size == entry.size and "sha256:" + hasher.hexdigest() == entry.digest


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False
