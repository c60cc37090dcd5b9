"""Blobs in a local folder: ``root/sha256/ab/<hex>``, uploads staged in ``root/_uploads``.

An upload's staged bytes are one file, ``_uploads/<id>/data``; each chunk is first
spooled to its own file beside it and appended (an in-kernel copy where the platform
has one) when it is published. Committing hashes ``data`` and renames it into place:
staging and blobs share a filesystem, so the rename is atomic and nothing is copied.
"""

from __future__ import annotations

import errno
import hashlib
import io
import os
import secrets
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

from modelport.blobs._common import (
    blob_not_found,
    blob_path_parts,
    check_upload_id,
    digest_mismatch,
    staging_lost,
)
from modelport.blobs.interface import BlobStore, StagingWriter
from modelport.blobs.types import StagedUpload

_COPY = 1 << 20
_UPLOADS = "_uploads"
_DATA = "data"


class LocalBlobStore(BlobStore):
    """Content-addressed files under ``root``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._uploads = root / _UPLOADS

    def path(self, digest: str) -> Path:
        """Where the blob ``digest`` lives (whether or not it is stored)."""
        return self.root.joinpath(*blob_path_parts(digest))

    # ---- committed blobs

    def size(self, digest: str) -> int | None:
        try:
            return self.path(digest).stat().st_size
        except FileNotFoundError:
            return None

    def read(self, digest: str, start: int = 0, end: int | None = None) -> Iterator[bytes]:
        try:
            handle = self.path(digest).open("rb")
        except FileNotFoundError:
            raise blob_not_found(digest) from None
        return _read_range(handle, start, end, self.chunk_size)

    def delete(self, digest: str) -> None:
        self.path(digest).unlink(missing_ok=True)

    # ---- staging

    def _upload_dir(self, upload_id: str) -> Path:
        return self._uploads / check_upload_id(upload_id)

    def open_staging(self, upload_id: str, offset: int) -> StagingWriter:
        folder = self._upload_dir(upload_id)
        folder.mkdir(parents=True, exist_ok=True)
        return _LocalChunk(folder, offset)

    def commit_staging(self, upload_id: str, digest: str, size: int) -> bool:
        data = self._upload_dir(upload_id) / _DATA
        if size == 0:
            data.parent.mkdir(parents=True, exist_ok=True)
            data.touch()
        try:
            handle = data.open("r+b")
        except FileNotFoundError:
            raise staging_lost(upload_id, size, 0) from None
        with handle:
            staged = os.fstat(handle.fileno()).st_size
            if staged < size:
                raise staging_lost(upload_id, size, staged)
            actual = _hash_prefix(handle, size)
            if actual != digest:
                raise digest_mismatch(digest, actual)
            target = self.path(digest)
            if target.exists():
                return False
            if staged > size:  # a publish whose transaction failed left bytes past the end
                handle.truncate(size)
            os.fsync(handle.fileno())
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(data, target)
        _fsync_dir(target.parent)
        return True

    def discard_staging(self, upload_id: str) -> None:
        shutil.rmtree(self._upload_dir(upload_id), ignore_errors=True)

    def staged_uploads(self) -> Iterator[StagedUpload]:
        try:
            folders = list(self._uploads.iterdir())
        except FileNotFoundError:
            return
        for folder in folders:
            try:
                times = [folder.stat().st_mtime] + [p.stat().st_mtime for p in folder.iterdir()]
            except FileNotFoundError:  # discarded meanwhile
                continue
            yield StagedUpload(folder.name, datetime.fromtimestamp(max(times), UTC))


class _LocalChunk(StagingWriter):
    """A chunk spooled to ``<upload>/chunk-<random>`` until it is appended to ``data``."""

    def __init__(self, folder: Path, offset: int) -> None:
        super().__init__(offset)
        self._folder = folder
        self._spool_path = folder / f"chunk-{secrets.token_hex(8)}"
        self._spool: BinaryIO | None = self._spool_path.open("xb+")

    def write(self, data: bytes | bytearray | memoryview) -> None:
        assert self._spool is not None, "write after publish or abort"
        self._spool.write(data)
        self.size += len(data)

    def publish(self) -> None:
        assert self._spool is not None, "publish after publish or abort"
        self._spool.flush()
        fd = os.open(self._folder / _DATA, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            staged = os.fstat(fd).st_size
            if staged < self.offset:
                raise staging_lost(self._folder.name, self.offset, staged)
            os.ftruncate(fd, self.offset)
            _copy_range(self._spool.fileno(), fd, self.size, self.offset)
            os.fsync(fd)
        finally:
            os.close(fd)
        self.abort()

    def abort(self) -> None:
        if self._spool is not None:
            self._spool.close()
            self._spool = None
            self._spool_path.unlink(missing_ok=True)


def _read_range(handle: BinaryIO, start: int, end: int | None, chunk: int) -> Iterator[bytes]:
    with handle:
        handle.seek(start)
        remaining = None if end is None else max(0, end - start)
        while remaining is None or remaining > 0:
            data = handle.read(chunk if remaining is None else min(chunk, remaining))
            if not data:
                return
            if remaining is not None:
                remaining -= len(data)
            yield data


def _hash_prefix(handle: io.BufferedIOBase, size: int) -> str:
    """Digest of the first ``size`` bytes of an open file."""
    hasher = hashlib.sha256()
    buffer = bytearray(_COPY)
    view = memoryview(buffer)
    handle.seek(0)
    remaining = size
    while remaining:
        n = handle.readinto(view[: min(_COPY, remaining)])
        if not n:
            break
        hasher.update(view[:n])
        remaining -= n
    return "sha256:" + hasher.hexdigest()


def _copy_range(src: int, dst: int, count: int, dst_offset: int) -> None:
    """Copy ``count`` bytes from the start of ``src`` to ``dst`` at ``dst_offset``."""
    copied = 0
    if hasattr(os, "copy_file_range"):
        try:
            while copied < count:
                n = os.copy_file_range(src, dst, count - copied, copied, dst_offset + copied)
                if n == 0:
                    break
                copied += n
        except OSError as exc:
            # Some filesystems and kernels refuse it; the plain loop below always works.
            if exc.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
                raise
    while copied < count:
        data = os.pread(src, min(_COPY, count - copied), copied)
        if not data:
            break
        copied += os.pwrite(dst, data, dst_offset + copied)
    if copied != count:
        raise OSError(errno.EIO, f"short copy: {copied} of {count} bytes")


def _fsync_dir(folder: Path) -> None:
    # Persist the rename itself; not every platform can open a directory.
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
