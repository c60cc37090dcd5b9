"""The ``files`` table: a tenant's files, newest first in pages."""

from __future__ import annotations

from sqlalchemy import and_, delete, or_, select
from sqlalchemy.orm import Session

from modelport.files.types import FileObject, FilePage, FilePurpose
from modelport.store.tables import FileRow


def _record(row: FileRow) -> FileObject:
    return FileObject(
        id=row.id,
        tenant=row.tenant,
        purpose=FilePurpose(row.purpose),
        filename=row.filename,
        bytes=row.size,
        digest=row.digest,
        created_at=row.created_at,
        lines=row.lines,
    )


def add(session: Session, file: FileObject) -> None:
    session.add(
        FileRow(
            id=file.id,
            tenant=file.tenant,
            purpose=file.purpose.value,
            filename=file.filename,
            size=file.bytes,
            digest=file.digest,
            lines=file.lines,
            created_at=file.created_at,
        )
    )


def get(session: Session, tenant: str, file_id: str) -> FileObject | None:
    row = session.get(FileRow, file_id)
    return _record(row) if row is not None and row.tenant == tenant else None


def remove(session: Session, tenant: str, file_id: str) -> bool:
    done = session.execute(delete(FileRow).where(FileRow.id == file_id, FileRow.tenant == tenant))
    return bool(getattr(done, "rowcount", 0))


def page(
    session: Session,
    tenant: str,
    *,
    purpose: FilePurpose | None,
    after: FileObject | None,
    limit: int,
    newest_first: bool,
) -> FilePage:
    """Up to ``limit`` files after ``after`` in (created_at, id) order."""
    query = select(FileRow).where(FileRow.tenant == tenant)
    if purpose is not None:
        query = query.where(FileRow.purpose == purpose.value)
    if after is not None:
        at, key = after.created_at, after.id
        if newest_first:
            beyond = or_(FileRow.created_at < at, and_(FileRow.created_at == at, FileRow.id < key))
        else:
            beyond = or_(FileRow.created_at > at, and_(FileRow.created_at == at, FileRow.id > key))
        query = query.where(beyond)
    if newest_first:
        query = query.order_by(FileRow.created_at.desc(), FileRow.id.desc())
    else:
        query = query.order_by(FileRow.created_at, FileRow.id)
    rows = session.scalars(query.limit(limit + 1)).all()
    return FilePage([_record(r) for r in rows[:limit]], has_more=len(rows) > limit)
