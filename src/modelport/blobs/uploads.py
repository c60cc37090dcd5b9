"""Resumable uploads with the OCI distribution spec's semantics.

``start`` an upload, append chunks each at the offset the server holds (``begin_chunk``
→ ``ChunkAppend.write`` … ``finish``), ``commit`` it with the expected digest, or
``abort`` it. An upload is invisible as a blob until it is committed. One untouched for
``ttl_seconds`` expires: it is refused at once and ``sweep_expired`` removes its row and
staged bytes.

The uploads row holds the offset. A chunk is staged privately while its bytes stream in;
it is published only after a conditional UPDATE moved the offset from where the chunk
started, inside that UPDATE's transaction, so of two chunks racing for one offset the
loser's bytes are dropped and it is told the current offset (416 ``offset_mismatch``).
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta

from modelport.blobs import repository as repo
from modelport.blobs._common import UPLOAD_ID_RE, check_upload_id
from modelport.blobs.interface import BlobStore, StagingWriter
from modelport.blobs.types import Blob, Upload
from modelport.digests import check_digest
from modelport.errors import InvalidInput, NotFound, PayloadTooLarge, RangeNotSatisfiable
from modelport.store import Database
from modelport.store.base import utcnow

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]


def upload_not_found(upload_id: str) -> NotFound:
    return NotFound(
        f"no upload {upload_id!r} (never started, committed, aborted or expired)",
        code="upload_not_found",
    )


def offset_mismatch(upload: Upload, start: int) -> RangeNotSatisfiable:
    return RangeNotSatisfiable(
        f"the chunk starts at {start} but upload {upload.id} is at offset {upload.offset}",
        code="offset_mismatch",
        offset=upload.offset,
    )


class UploadService:
    """Starts, appends to, commits, aborts and expires resumable uploads."""

    def __init__(
        self,
        database: Database,
        store: BlobStore,
        *,
        ttl_seconds: int,
        max_chunk_bytes: int,
        clock: Clock = utcnow,
    ) -> None:
        self.database = database
        self.store = store
        self.ttl = timedelta(seconds=ttl_seconds)
        self.max_chunk_bytes = max_chunk_bytes
        self.clock = clock

    def start(self, tenant: str | None = None) -> Upload:
        """A new upload; committing it will record ``tenant`` as holding the blob."""
        now = self.clock()
        upload = Upload(secrets.token_urlsafe(24), 0, now, now, now + self.ttl, tenant)
        with self.database.transaction() as session:
            repo.add_upload(session, upload)
        return upload

    def get(self, upload_id: str) -> Upload:
        """The live upload ``upload_id``; ``upload_not_found`` if unknown or expired."""
        if not UPLOAD_ID_RE.match(upload_id):
            raise upload_not_found(upload_id)
        with self.database.transaction() as session:
            upload = repo.live_upload(session, upload_id, self.clock())
        if upload is None:
            raise upload_not_found(upload_id)
        return upload

    def begin_chunk(
        self, upload_id: str, start: int | None = None, *, length: int | None = None
    ) -> ChunkAppend:
        """Open a chunk at ``start`` (None: wherever the upload is now).

        ``length``, when the client declared it, is refused early if too large and
        checked against the bytes that arrive.
        """
        if length is not None and length > self.max_chunk_bytes:
            raise self._too_large()
        upload = self.get(upload_id)
        if start is None:
            start = upload.offset
        elif start != upload.offset:
            raise offset_mismatch(upload, start)
        return ChunkAppend(self, upload_id, self.store.open_staging(upload_id, start), length)

    def append(
        self,
        upload_id: str,
        start: int | None,
        chunks: Iterable[bytes],
        *,
        length: int | None = None,
    ) -> Upload:
        """Append one chunk given as an iterable of byte strings (the synchronous path)."""
        chunk = self.begin_chunk(upload_id, start, length=length)
        try:
            for data in chunks:
                chunk.write(data)
            return chunk.finish()
        finally:
            chunk.abort()

    def _publish(self, upload_id: str, writer: StagingWriter) -> Upload:
        now = self.clock()
        end = writer.offset + writer.size
        with self.database.transaction() as session:
            if not repo.advance_upload(session, upload_id, writer.offset, end, now, now + self.ttl):
                current = repo.live_upload(session, upload_id, now)
                if current is None:
                    raise upload_not_found(upload_id)
                raise offset_mismatch(current, writer.offset)
            # Inside the transaction: if publishing fails the offset does not move.
            writer.publish()
            upload = repo.live_upload(session, upload_id, now)
        assert upload is not None
        return upload

    def _too_large(self) -> PayloadTooLarge:
        return PayloadTooLarge(
            f"a chunk may carry at most {self.max_chunk_bytes} bytes",
            code="chunk_too_large",
            max_chunk_bytes=self.max_chunk_bytes,
        )

    def commit(self, upload_id: str, digest: str) -> Blob:
        """Store the upload's bytes under ``digest`` if they hash to it, and record the
        upload's tenant as holding the blob.

        A blob already stored with that digest is not written again, but the staged bytes
        are still hashed: the commit is the tenant's proof that it has the bytes, which a
        digest and size alone (learned from anywhere) are not. On ``digest_mismatch``
        nothing is stored or recorded and the upload stays, so the client may retry with
        the right digest or abort.
        """
        check_digest(digest)
        check_upload_id(upload_id)
        now = self.clock()
        # Taking the row makes the staged bytes ours: a racing chunk can no longer publish.
        with self.database.transaction() as session:
            upload = repo.take_upload(session, upload_id, now)
        if upload is None:
            raise upload_not_found(upload_id)
        try:
            stored = self.store.size(digest)
            if stored is not None and stored != upload.offset:
                raise InvalidInput(
                    f"the upload has {upload.offset} bytes but {digest} has {stored}; "
                    "nothing was stored",
                    code="digest_mismatch",
                    expected=digest,
                )
            # Hashes the staged bytes even when the blob is stored already (then it
            # writes nothing): only bytes that hash to the digest prove possession.
            self.store.commit_staging(upload_id, digest, upload.offset)
        except BaseException:
            with self.database.transaction() as session:
                repo.add_upload(session, upload)
            raise
        blob = Blob(digest, upload.offset)
        with self.database.transaction() as session:
            repo.record_blob(session, blob, now)
            if upload.tenant is not None:
                repo.record_owner(session, [digest], upload.tenant, now)
        self.store.discard_staging(upload_id)
        return blob

    def abort(self, upload_id: str) -> None:
        """Drop a live upload and its staged bytes."""
        check_upload_id(upload_id)
        with self.database.transaction() as session:
            upload = repo.take_upload(session, upload_id, self.clock())
        if upload is None:
            raise upload_not_found(upload_id)
        self.store.discard_staging(upload_id)

    def sweep_expired(self, batch: int = 500) -> int:
        """Remove expired uploads and staged bytes left without an upload; how many."""
        now = self.clock()
        removed = 0
        while True:
            with self.database.transaction() as session:
                expired = repo.expired_upload_ids(session, now, batch)
            swept = 0
            for upload_id in expired:
                with self.database.transaction() as session:
                    gone = repo.remove_expired_upload(session, upload_id, now)
                if gone:
                    self.store.discard_staging(upload_id)
                    swept += 1
            removed += swept
            if len(expired) < batch or swept == 0:
                break
        # Staged bytes with no row: a crash between giving up a row and discarding them.
        stale = [
            s.upload_id
            for s in self.store.staged_uploads()
            if s.modified_at <= now - self.ttl and UPLOAD_ID_RE.match(s.upload_id)
        ]
        with self.database.transaction() as session:
            live = repo.existing_upload_ids(session, stale)
        for upload_id in stale:
            if upload_id not in live:
                self.store.discard_staging(upload_id)
                removed += 1
        if removed:
            log.info("swept %d expired or abandoned uploads", removed)
        return removed


class ChunkAppend:
    """One chunk on its way in: ``write`` its bytes, then ``finish``; ``abort`` on failure.

    ``abort`` after ``finish`` does nothing, so callers may always abort in ``finally``.
    """

    def __init__(
        self, service: UploadService, upload_id: str, writer: StagingWriter, length: int | None
    ) -> None:
        self._service = service
        self.upload_id = upload_id
        self._writer = writer
        self._length = length

    @property
    def start(self) -> int:
        return self._writer.offset

    @property
    def size(self) -> int:
        return self._writer.size

    def write(self, data: bytes | bytearray | memoryview) -> None:
        size = self._writer.size + len(data)
        if size > self._service.max_chunk_bytes:
            self.abort()
            raise self._service._too_large()
        if self._length is not None and size > self._length:
            self.abort()
            raise self._length_mismatch(size)
        self._writer.write(data)

    def finish(self) -> Upload:
        """Publish the chunk at its offset and return the upload moved past it."""
        if self._length is not None and self._writer.size != self._length:
            self.abort()
            raise self._length_mismatch(self._writer.size)
        try:
            return self._service._publish(self.upload_id, self._writer)
        finally:
            self.abort()

    def abort(self) -> None:
        self._writer.abort()

    def _length_mismatch(self, got: int) -> InvalidInput:
        return InvalidInput(
            f"the chunk was declared as {self._length} bytes but "
            f"{'more' if got > (self._length or 0) else got} arrived; it was dropped",
            code="chunk_length_mismatch",
        )
