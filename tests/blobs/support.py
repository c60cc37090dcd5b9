"""Helpers for the blob tests (fixtures live in conftest.py)."""

from __future__ import annotations

import hashlib
import secrets
from datetime import UTC, datetime, timedelta

from modelport.blobs.interface import BlobStore


def digest_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def new_upload_id() -> str:
    return secrets.token_urlsafe(24)


def stage(store: BlobStore, upload_id: str, offset: int, data: bytes) -> None:
    """Write and publish one chunk straight into a store (no database involved)."""
    writer = store.open_staging(upload_id, offset)
    writer.write(data)
    writer.publish()


def read_all(store: BlobStore, digest: str, start: int = 0, end: int | None = None) -> bytes:
    return b"".join(store.read(digest, start, end))


class FakeClock:
    """A clock tests move by hand."""

    def __init__(self) -> None:
        self.now = datetime(2030, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)
