"""The blob store contract. Users subclass ``BlobStore`` to add a backend.

Committed blobs are addressed by ``sha256:<hex>`` digests and never change. An upload's
bytes are *staged* under its id until they are committed. The call order, driven by
``modelport.blobs.uploads.UploadService`` (which keeps each upload's authoritative
offset in the database), is:

1. ``open_staging(upload_id, offset)`` once per chunk. The returned ``StagingWriter``
   keeps the chunk private while the request body streams in (``write``), then either
   ``publish``-es it at ``offset`` (the chunk won that offset) or ``abort``-s it.
   Concurrent chunks for one upload may be written at the same time; only the one the
   service lets win is ever published.
2. ``commit_staging(upload_id, digest, size)`` hashes the first ``size`` staged bytes and,
   only if they hash to ``digest``, moves them to their content address. On a mismatch
   nothing is stored and the staged bytes are kept, so the client may retry with the
   right digest or abort.
3. ``discard_staging(upload_id)`` drops everything staged (after commit, abort, expiry).

Reads (``read``) stream in chunks of about ``chunk_size`` and never hold a whole blob in
memory. ``size`` is the cheap presence check other layers use.
"""

from __future__ import annotations

import abc
from collections.abc import Iterator

from modelport.blobs.types import StagedUpload


class StagingWriter(abc.ABC):
    """One chunk of an upload, staged privately until it is published.

    Call ``write`` any number of times, then exactly one of ``publish`` or ``abort``.
    ``abort`` after ``publish`` does nothing, so callers may always abort in ``finally``.
    """

    def __init__(self, offset: int) -> None:
        self.offset = offset
        """Where in the upload this chunk starts."""
        self.size = 0
        """Bytes written so far."""

    @abc.abstractmethod
    def write(self, data: bytes | bytearray | memoryview) -> None:
        """Append bytes to the private chunk."""

    @abc.abstractmethod
    def publish(self) -> None:
        """Make the chunk the upload's staged bytes ``[offset, offset + size)``, durably.

        The caller holds the upload: it has just moved the upload's recorded offset from
        ``offset`` to ``offset + size`` in a transaction it commits only if this returns,
        so no other chunk of the upload is published meanwhile. Bytes at or beyond
        ``offset`` left by an earlier publish whose transaction failed are replaced.
        """

    @abc.abstractmethod
    def abort(self) -> None:
        """Drop the private chunk (the request broke off, was refused or lost a race)."""


class BlobStore(abc.ABC):
    """Bytes addressed by ``sha256:<hex>`` digests, plus per-upload staging."""

    chunk_size: int = 1 << 20

    # ---- committed blobs
    @abc.abstractmethod
    def size(self, digest: str) -> int | None:
        """Stored size of a blob, or None if it is not stored."""

    @abc.abstractmethod
    def read(self, digest: str, start: int = 0, end: int | None = None) -> Iterator[bytes]:
        """Stream bytes ``[start, end)`` of a stored blob (``end`` None: to the end).

        Raises ``modelport.errors.NotFound`` (code ``blob_not_found``) at once, before
        the first chunk, when the blob is not stored.
        """

    @abc.abstractmethod
    def delete(self, digest: str) -> None:
        """Remove a stored blob; no error if it is not stored."""

    # ---- staging
    @abc.abstractmethod
    def open_staging(self, upload_id: str, offset: int) -> StagingWriter:
        """A writer for one chunk of ``upload_id`` that starts at ``offset``."""

    @abc.abstractmethod
    def commit_staging(self, upload_id: str, digest: str, size: int) -> bool:
        """Verify the first ``size`` staged bytes and store them under ``digest``.

        Returns True if the blob was stored now, False if it was stored already (then
        nothing is written again). Raises ``modelport.errors.InvalidInput`` (code
        ``digest_mismatch``) when the bytes do not hash to ``digest``; nothing is stored
        and the staged bytes are kept. Raises ``modelport.errors.Internal`` (code
        ``staging_lost``) when fewer than ``size`` bytes are staged.
        """

    @abc.abstractmethod
    def discard_staging(self, upload_id: str) -> None:
        """Drop an upload's staged bytes; no error if there are none."""

    @abc.abstractmethod
    def staged_uploads(self) -> Iterator[StagedUpload]:
        """Every upload id with staged bytes (to find ones left behind by a crash)."""
