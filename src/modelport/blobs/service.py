"""Reading committed blobs: presence, size checks against the record, verified streams."""

from __future__ import annotations

from collections.abc import Iterator

from modelport.blobs import repository as repo
from modelport.blobs._common import blob_not_found
from modelport.blobs.interface import BlobStore
from modelport.blobs.types import Blob
from modelport.blobs.verify import blob_corrupted, hash_blob, iter_verified
from modelport.digests import check_digest
from modelport.store import Database


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
