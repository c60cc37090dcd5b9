"""Resumable uploads (to be implemented)."""

from __future__ import annotations

from modelport.blobs.interface import BlobStore
from modelport.store import Database


class UploadService:
    def __init__(
        self, database: Database, store: BlobStore, *, ttl_seconds: int, max_chunk_bytes: int
    ) -> None:
        self.database = database
        self.store = store
        self.ttl_seconds = ttl_seconds
        self.max_chunk_bytes = max_chunk_bytes
