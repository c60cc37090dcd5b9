"""Registry service (to be implemented)."""

from __future__ import annotations

from typing import Any

from modelport.blobs import BlobStore
from modelport.store import Database


class RegistryService:
    def __init__(
        self, database: Database, blobs: BlobStore, *, signer: Any, validator: Any
    ) -> None:
        self.database = database
        self.blobs = blobs
        self.signer = signer
        self.validator = validator
