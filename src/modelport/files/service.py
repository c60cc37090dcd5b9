"""The files use case: upload (a batch file checked line by line first), get, list,
read and delete a tenant's files. Another tenant's file is ``file_not_found``, as a
missing one is."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime

from sqlalchemy.exc import IntegrityError

from modelport.errors import InvalidInput, NotFound, PayloadTooLarge
from modelport.files import repository as repo
from modelport.files.batch_lines import check_batch_file
from modelport.files.types import UPLOADABLE, FileObject, FilePage, FilePurpose
from modelport.store.database import Database

MAX_FILENAME = 255
MAX_PAGE = 10_000

PutBlob = Callable[[bytes, str], str]
"""Stores bytes as a blob held by a tenant; their digest."""
ReadBlob = Callable[[str], Iterator[bytes]]
"""A stored blob's bytes, verified."""
PutChunks = Callable[[Iterable[bytes], str], tuple[str, int]]
"""Stores bytes that arrive in pieces as a blob held by a tenant; its digest and size."""


def file_not_found(file_id: str) -> NotFound:
    return NotFound(f"no file {file_id!r}", code="file_not_found")


class FileService:
    """A tenant's files over the blob store (content addressed: the same bytes uploaded
    twice are stored once; each upload is a file of its own)."""

    def __init__(
        self,
        database: Database,
        *,
        put_blob: PutBlob,
        read_blob: ReadBlob,
        put_chunks: PutChunks | None = None,
        now: Callable[[], datetime],
        max_bytes: int,
    ) -> None:
        self.database = database
        self.put_blob = put_blob
        self.read_blob = read_blob
        self.put_chunks = put_chunks or (
            lambda chunks, tenant: _joined_put(put_blob, b"".join(chunks), tenant)
        )
        self.now = now
        self.max_bytes = max_bytes

    def create(self, tenant: str, purpose: str, filename: str, data: bytes) -> FileObject:
        """Store ``data`` as ``tenant``'s file; a ``batch`` file is checked first and
        refused whole (``invalid_batch_file``) if one line breaks the format."""
        try:
            kind = FilePurpose(purpose)
        except ValueError:
            kind = None
        if kind not in UPLOADABLE:
            allowed = ", ".join(sorted(p.value for p in UPLOADABLE))
            raise InvalidInput(
                f"purpose {purpose!r} is not served here: one of {allowed}",
                code="unsupported_purpose",
            )
        assert kind is not None
        if not filename or len(filename) > MAX_FILENAME or "/" in filename or "\0" in filename:
            raise InvalidInput(
                f"the file name must be 1 to {MAX_FILENAME} characters without '/'",
                code="invalid_filename",
            )
        if len(data) > self.max_bytes:
            raise PayloadTooLarge(
                f"the file is above the limit of {self.max_bytes} bytes", code="file_too_large"
            )
        lines = check_batch_file(data) if kind is FilePurpose.BATCH else None
        return self._store(tenant, kind, filename, data, lines)

    def write(
        self,
        tenant: str,
        purpose: FilePurpose,
        filename: str,
        data: bytes | Iterable[bytes],
        *,
        file_id: str | None = None,
    ) -> FileObject:
        """A file the platform writes for ``tenant`` (a batch's output), unchecked;
        ``data`` its bytes, or its pieces in order (streamed to the blob store, never
        joined). ``file_id``: a fixed id (``file-`` and 24 hex digits), so that writing
        again answers the file written before (reading none of ``data``) instead of a
        second one."""
        if file_id is not None:
            with self.database.transaction() as session:
                found = repo.get(session, tenant, file_id)
            if found is not None:
                return found
        if isinstance(data, bytes):
            digest, size = self.put_blob(data, tenant), len(data)
        else:
            digest, size = self.put_chunks(data, tenant)
        try:
            return self._record(tenant, purpose, filename, digest, size, None, file_id)
        except IntegrityError:
            if file_id is None:
                raise
            return self.get(tenant, file_id)  # a concurrent writer won

    def _store(
        self, tenant: str, purpose: FilePurpose, filename: str, data: bytes, lines: int | None
    ) -> FileObject:
        digest = self.put_blob(data, tenant)
        return self._record(tenant, purpose, filename, digest, len(data), lines)

    def _record(
        self,
        tenant: str,
        purpose: FilePurpose,
        filename: str,
        digest: str,
        size: int,
        lines: int | None,
        file_id: str | None = None,
    ) -> FileObject:
        file = FileObject(
            id=file_id or "file-" + secrets.token_hex(12),
            tenant=tenant,
            purpose=purpose,
            filename=filename,
            bytes=size,
            digest=digest,
            created_at=self.now(),
            lines=lines,
        )
        with self.database.transaction() as session:
            repo.add(session, file)
        return file

    def get(self, tenant: str, file_id: str) -> FileObject:
        with self.database.transaction() as session:
            file = repo.get(session, tenant, file_id)
        if file is None:
            raise file_not_found(file_id)
        return file

    def content(self, tenant: str, file_id: str) -> tuple[FileObject, Iterator[bytes]]:
        """The file and its bytes (verified against its digest as they are read)."""
        file = self.get(tenant, file_id)
        return file, self.read_blob(file.digest)

    def delete(self, tenant: str, file_id: str) -> None:
        """Forget the file (its bytes stay while another file or version lists them)."""
        with self.database.transaction() as session:
            removed = repo.remove(session, tenant, file_id)
        if not removed:
            raise file_not_found(file_id)

    def list(
        self,
        tenant: str,
        *,
        purpose: str | None = None,
        after: str | None = None,
        limit: int = MAX_PAGE,
        newest_first: bool = True,
    ) -> FilePage:
        if not 1 <= limit <= MAX_PAGE:
            raise InvalidInput(f"limit must be 1 to {MAX_PAGE}", code="invalid_limit")
        kind = None
        if purpose is not None:
            try:
                kind = FilePurpose(purpose)
            except ValueError:
                raise InvalidInput(f"unknown purpose {purpose!r}", code="invalid_purpose") from None
        with self.database.transaction() as session:
            start = repo.get(session, tenant, after) if after is not None else None
            if after is not None and start is None:
                raise file_not_found(after)
            return repo.page(
                session, tenant, purpose=kind, after=start, limit=limit, newest_first=newest_first
            )


def _joined_put(put_blob: PutBlob, data: bytes, tenant: str) -> tuple[str, int]:
    return put_blob(data, tenant), len(data)
