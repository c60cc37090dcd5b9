"""Plain records of the blob layer (frozen, no I/O)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class Blob:
    """A committed, content-addressed blob."""

    digest: str
    size: int


@dataclass(frozen=True)
class Upload:
    """A resumable upload in progress: ``offset`` bytes are staged so far."""

    id: str
    offset: int
    created_at: datetime
    updated_at: datetime
    expires_at: datetime
    tenant: str | None = None
    """Who started it; committing it proves this tenant holds the bytes (None: the admin)."""


@dataclass(frozen=True)
class StagedUpload:
    """An upload id that has staged bytes in a store, and when they last changed."""

    upload_id: str
    modified_at: datetime
