"""Reading committed blobs: presence, size checks against the record, verified streams."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable, Iterator

from modelport.blobs import repository as repo
from modelport.blobs._common import blob_not_found
from modelport.blobs.interface import BlobStore
from modelport.blobs.types import Blob
from modelport.blobs.verify import blob_corrupted, hash_blob, iter_verified
from modelport.digests import check_digest, sha256_digest
from modelport.store import Database
from modelport.store.base import utcnow


class BlobService:
    """Serves stored blobs, never knowingly sending corrupted bytes.

    Verification is done where it is cheap: the stored size is compared with the recorded
    one before anything is sent; blobs up to ``verify_below_bytes`` are hashed before they
    are sent; bigger whole-blob reads are hashed while they stream and cut off before
    their last chunk on a mismatch. Ranges of big blobs get the size check only.
    """

    def __init__(self, database: Database, store: BlobStore, *, verify_below_bytes: int) -> None:
        self.database = database
        self.store = store
        self.verify_below_bytes = verify_below_bytes

    def exists(self, digest: str) -> bool:
        return self.store.size(check_digest(digest)) is not None

    def held_by(self, tenant: str, digest: str) -> bool:
        """Whether ``tenant`` holds the blob ``digest`` (it uploaded the bytes)."""
        with self.database.transaction() as session:
            return digest in repo.held_by(session, tenant, [check_digest(digest)])

    def put(self, data: bytes, *, tenant: str | None = None) -> str:
        """Store ``data`` and record it (content-addressed: storing the same bytes again is
        a no-op); with ``tenant``, that tenant holds it (``held_by``). Its digest."""
        digest = sha256_digest(data)
        if self.store.size(digest) is None:
            upload_id = uuid.uuid4().hex
            try:
                writer = self.store.open_staging(upload_id, 0)
                writer.write(data)
                writer.publish()
                self.store.commit_staging(upload_id, digest, len(data))
            finally:
                self.store.discard_staging(upload_id)
        now = utcnow()
        with self.database.transaction() as session:
            repo.record_blob(session, Blob(digest, len(data)), now)
            if tenant is not None:
                repo.record_owner(session, [digest], tenant, now)
        return digest

    def put_chunks(self, chunks: Iterable[bytes], *, tenant: str | None = None) -> Blob:
        """``put`` for bytes that arrive in pieces (a batch's output file made of its
        shards): they are staged as they come and hashed on the way, never held whole."""
        upload_id = uuid.uuid4().hex
        hasher = hashlib.sha256()
        size = 0
        try:
            writer = self.store.open_staging(upload_id, 0)
            try:
                for chunk in chunks:
                    writer.write(chunk)
                    hasher.update(chunk)
                    size += len(chunk)
                writer.publish()
            finally:
                writer.abort()  # nothing after a publish
            digest = "sha256:" + hasher.hexdigest()
            self.store.commit_staging(upload_id, digest, size)  # False: stored already
        finally:
            self.store.discard_staging(upload_id)
        now = utcnow()
        with self.database.transaction() as session:
            repo.record_blob(session, Blob(digest, size), now)
            if tenant is not None:
                repo.record_owner(session, [digest], tenant, now)
        return Blob(digest, size)

    def get(self, digest: str) -> bytes:
        """The whole blob ``digest``, verified (``blob_not_found``, ``blob_corrupted``)."""
        return b"".join(self.read(self.stat(digest)))

    def stat(self, digest: str) -> Blob:
        """The stored blob; ``blob_not_found``, or ``blob_corrupted`` on a size mismatch."""
        check_digest(digest)
        size = self.store.size(digest)
        if size is None:
            raise blob_not_found(digest)
        with self.database.transaction() as session:
            recorded = repo.recorded_blob(session, digest)
        if recorded is not None and recorded.size != size:
            raise blob_corrupted(digest, f"{size} bytes stored where {recorded.size} are recorded")
        return Blob(digest, size)

    def open_ranges(self, digest: str, *, verify: bool = True) -> BlobRanges:
        """Ranged reads of one blob, for a reader that takes it piece by piece (a
        ``.npy`` file's rows): the size is checked once, and a blob up to
        ``verify_below_bytes`` is hashed once, here, instead of on every range.
        ``verify=False`` skips the hash, for a glance at a header or footer that
        decides nothing (a job's progress), where hashing would cost more than it reads."""
        blob = self.stat(digest)
        if verify and blob.size <= self.verify_below_bytes:
            actual, size = hash_blob(self.store, blob.digest)
            if actual != blob.digest or size != blob.size:
                raise blob_corrupted(blob.digest, f"its {size} bytes hash to {actual}")
        return BlobRanges(self.store, blob)

    def read(self, blob: Blob, start: int = 0, end: int | None = None) -> Iterator[bytes]:
        """Stream bytes ``[start, end)`` of a blob returned by ``stat``."""
        end = blob.size if end is None else min(end, blob.size)
        if blob.size <= self.verify_below_bytes:
            actual, size = hash_blob(self.store, blob.digest)
            if actual != blob.digest:
                raise blob_corrupted(blob.digest, f"its bytes hash to {actual}")
            if size != blob.size:
                raise blob_corrupted(blob.digest, f"{size} bytes read where {blob.size} stored")
            return self.store.read(blob.digest, start, end)
        if start == 0 and end == blob.size:
            return iter_verified(self.store, blob.digest, blob.size)
        return self.store.read(blob.digest, start, end)


class BlobRanges:
    """Byte ranges of one stored blob (``BlobService.open_ranges``)."""

    def __init__(self, store: BlobStore, blob: Blob) -> None:
        self._store = store
        self.blob = blob

    @property
    def size(self) -> int:
        return self.blob.size

    def read(self, start: int, end: int) -> bytes:
        """Bytes ``[start, end)``, clipped to the blob; only they are read."""
        end = min(end, self.blob.size)
        if end <= start:
            return b""
        return b"".join(self._store.read(self.blob.digest, start, end))

    def stream(self, start: int, end: int) -> Iterator[bytes]:
        """``read`` in the store's chunks, for a range too big to hold at once."""
        end = min(end, self.blob.size)
        if end <= start:
            return iter(())
        return self._store.read(self.blob.digest, start, end)
