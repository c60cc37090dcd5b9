"""Queries on the ``uploads`` and ``blobs`` tables; every function takes the caller's session.

The uploads row is the authority on an upload's offset: it only ever moves by a
conditional UPDATE from the offset a chunk started at, so of two chunks racing for the
same offset exactly one wins.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import delete, insert, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from modelport.blobs.types import Blob, Upload
from modelport.store.tables import BlobRow, UploadRow


def _upload(row: UploadRow) -> Upload:
    return Upload(row.id, row.offset, row.created_at, row.updated_at, row.expires_at)


def add_upload(session: Session, upload: Upload) -> None:
    session.execute(
        insert(UploadRow).values(
            id=upload.id,
            offset=upload.offset,
            created_at=upload.created_at,
            updated_at=upload.updated_at,
            expires_at=upload.expires_at,
        )
    )


def live_upload(session: Session, upload_id: str, now: datetime) -> Upload | None:
    row = session.scalar(
        select(UploadRow).where(UploadRow.id == upload_id, UploadRow.expires_at > now)
    )
    return None if row is None else _upload(row)


def advance_upload(
    session: Session, upload_id: str, old: int, new: int, now: datetime, expires_at: datetime
) -> bool:
    """Move a live upload from offset ``old`` to ``new``; False if it is not at ``old``."""
    result = session.execute(
        update(UploadRow)
        .where(UploadRow.id == upload_id, UploadRow.offset == old, UploadRow.expires_at > now)
        .values(offset=new, updated_at=now, expires_at=expires_at)
        .execution_options(synchronize_session=False)
    )
    return bool(result.rowcount)


def take_upload(session: Session, upload_id: str, now: datetime) -> Upload | None:
    """Delete a live upload's row and return it: its staged bytes are now the caller's."""
    row = session.execute(
        delete(UploadRow)
        .where(UploadRow.id == upload_id, UploadRow.expires_at > now)
        .returning(
            UploadRow.id,
            UploadRow.offset,
            UploadRow.created_at,
            UploadRow.updated_at,
            UploadRow.expires_at,
        )
    ).one_or_none()
    return None if row is None else Upload(*row)


def remove_upload(session: Session, upload_id: str) -> bool:
    result = session.execute(delete(UploadRow).where(UploadRow.id == upload_id))
    return bool(result.rowcount)


def expired_upload_ids(session: Session, now: datetime, limit: int) -> list[str]:
    return list(
        session.scalars(
            select(UploadRow.id)
            .where(UploadRow.expires_at <= now)
            .order_by(UploadRow.expires_at)
            .limit(limit)
        )
    )


def remove_expired_upload(session: Session, upload_id: str, now: datetime) -> bool:
    """Delete the row only if it is still expired (a chunk may have just refreshed it)."""
    result = session.execute(
        delete(UploadRow).where(UploadRow.id == upload_id, UploadRow.expires_at <= now)
    )
    return bool(result.rowcount)


def existing_upload_ids(session: Session, upload_ids: Sequence[str]) -> set[str]:
    if not upload_ids:
        return set()
    return set(session.scalars(select(UploadRow.id).where(UploadRow.id.in_(upload_ids))))


def record_blob(session: Session, blob: Blob, now: datetime) -> None:
    """Record a committed blob; a second record of the same digest is a no-op."""
    values = {"digest": blob.digest, "size": blob.size, "created_at": now}
    dialect = session.get_bind().dialect.name
    if dialect == "postgresql":
        statement = postgresql.insert(BlobRow).values(values).on_conflict_do_nothing()
    elif dialect == "sqlite":
        statement = sqlite.insert(BlobRow).values(values).on_conflict_do_nothing()
    else:
        if session.get(BlobRow, blob.digest) is not None:
            return
        statement = insert(BlobRow).values(values)
    session.execute(statement)


def recorded_blob(session: Session, digest: str) -> Blob | None:
    row = session.get(BlobRow, digest)
    return None if row is None else Blob(row.digest, row.size)
