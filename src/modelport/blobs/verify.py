"""Reading blobs with their digest checked, for anyone who must not trust the store.

``iter_verified`` holds back the last chunk until the whole blob has hashed right, so a
consumer of a corrupted blob never sees all of its bytes; it gets ``blob_corrupted``
instead. ``copy_verified`` leaves either the verified file or nothing.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from modelport.blobs.interface import BlobStore
from modelport.errors import Internal

log = logging.getLogger(__name__)


def blob_corrupted(digest: str, detail: str) -> Internal:
    log.error("blob %s is corrupted: %s", digest, detail)
    return Internal(
        f"blob {digest} is corrupted in the blob store ({detail})",
        code="blob_corrupted",
        digest=digest,
    )


def iter_verified(store: BlobStore, digest: str, size: int | None = None) -> Iterator[bytes]:
    """Stream a whole blob; raise ``blob_corrupted`` instead of its last chunk if it is bad.

    ``size``, when known, is checked too. ``NotFound`` (``blob_not_found``) is raised at
    once if the blob is not stored.
    """
    return _verified(store.read(digest), digest, size)


def _verified(chunks: Iterator[bytes], digest: str, size: int | None) -> Iterator[bytes]:
    hasher = hashlib.sha256()
    total = 0
    held: bytes | None = None
    for chunk in chunks:
        if held is not None:
            yield held
        hasher.update(chunk)
        total += len(chunk)
        held = chunk
    actual = "sha256:" + hasher.hexdigest()
    if actual != digest:
        raise blob_corrupted(digest, f"its bytes hash to {actual}")
    if size is not None and total != size:
        raise blob_corrupted(digest, f"{total} bytes where {size} are recorded")
    if held is not None:
        yield held


def hash_blob(store: BlobStore, digest: str) -> tuple[str, int]:
    """The digest and size of a stored blob's bytes as read now."""
    hasher = hashlib.sha256()
    total = 0
    for chunk in store.read(digest):
        hasher.update(chunk)
        total += len(chunk)
    return "sha256:" + hasher.hexdigest(), total


def copy_verified(store: BlobStore, digest: str, dest: Path) -> None:
    """Copy a blob to ``dest`` through a temporary file beside it, verified, then renamed.

    Raises ``blob_corrupted`` (and leaves nothing at ``dest`` or beside it) on a mismatch.
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".partial")
    temporary = Path(name)
    try:
        with os.fdopen(fd, "wb") as out:
            for chunk in iter_verified(store, digest):
                out.write(chunk)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, dest)
    finally:
        temporary.unlink(missing_ok=True)
