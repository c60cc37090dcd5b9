"""Plain records of files (no I/O)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any


class FilePurpose(StrEnum):
    """What a file is for (OpenAI's purposes the platform serves)."""

    BATCH = "batch"
    """Requests of a batch, one JSON object a line (checked on upload)."""
    BATCH_OUTPUT = "batch_output"
    """A batch's answers or errors, written by the platform."""
    USER_DATA = "user_data"
    """Anything else a job reads (not checked)."""


UPLOADABLE = frozenset({FilePurpose.BATCH, FilePurpose.USER_DATA})


@dataclass(frozen=True, slots=True)
class FileObject:
    """A stored file of a tenant."""

    id: str
    tenant: str
    purpose: FilePurpose
    filename: str
    bytes: int
    digest: str
    created_at: datetime
    lines: int | None = None
    """Requests in a ``batch`` file."""


@dataclass(frozen=True, slots=True)
class BatchLine:
    """One request of a batch file (OpenAI's batch input format)."""

    custom_id: str
    method: str
    url: str
    body: dict[str, Any]


@dataclass(frozen=True, slots=True)
class FilePage:
    """A page of a tenant's files, and whether more follow."""

    files: list[FileObject]
    has_more: bool
