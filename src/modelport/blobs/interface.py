"""The blob store contract. Users subclass ``BlobStore`` to add a backend.

Call order for an upload (driven by ``modelport.blobs.uploads.UploadService``):

1. ``open_staging(upload_id, offset)`` once per chunk; write the chunk's bytes to the
   returned writer and ``close()`` it. ``offset`` must equal ``staged_size(upload_id)``.
2. ``commit_staging(upload_id, digest)`` verifies the staged bytes hash to ``digest``
   and moves them to their content address; on mismatch nothing is stored.
3. ``discard_staging(upload_id)`` drops staged bytes (abort, expiry, after commit).

Reads (``read``) stream in chunks and never hold a whole blob in memory.
"""

from __future__ import annotations

import abc
from collections.abc import Iterator


class StagingWriter(abc.ABC):
    """Appends one chunk to an upload's staged bytes."""

    @abc.abstractmethod
    def write(self, data: bytes) -> None: ...

    @abc.abstractmethod
    def close(self) -> int:
        """Make the chunk durable; return the staged size after it."""

    @abc.abstractmethod
    def abort(self) -> None:
        """Drop the chunk written so far (the request broke off)."""


class BlobStore(abc.ABC):
    """Bytes addressed by ``sha256:<hex>`` digests, plus per-upload staging."""

    chunk_size: int = 1 << 20

    # ---- committed blobs
    @abc.abstractmethod
    def size(self, digest: str) -> int | None:
        """Stored size of a blob, or None if it is not stored."""

    @abc.abstractmethod
    def read(self, digest: str, start: int = 0, end: int | None = None) -> Iterator[bytes]:
        """Stream bytes ``[start, end)`` of a stored blob (``end`` None: to the end)."""

    @abc.abstractmethod
    def delete(self, digest: str) -> None: ...

    # ---- staging
    @abc.abstractmethod
    def staged_size(self, upload_id: str) -> int: ...

    @abc.abstractmethod
    def open_staging(self, upload_id: str, offset: int) -> StagingWriter: ...

    @abc.abstractmethod
    def commit_staging(self, upload_id: str, digest: str) -> int:
        """Verify and store the staged bytes under ``digest``; return their size.

        Raises ``modelport.errors.InvalidInput`` (code ``digest_mismatch``) when the bytes
        do not hash to ``digest``; the staged bytes are kept so the client may fix the
        digest or abort. If the blob is already stored, nothing is written again.
        """

    @abc.abstractmethod
    def discard_staging(self, upload_id: str) -> None: ...
