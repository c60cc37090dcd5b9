"""Queries on the ``uploads``, ``blobs`` and ``blob_owners`` tables; every function takes
the caller's session.

The uploads row is the authority on an upload's offset: it only ever moves by a
conditional UPDATE from the offset a chunk started at, so of two chunks racing for the
same offset exactly one wins.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Insert, delete, insert, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from modelport.blobs.types import Blob, Upload
from modelport.store.database import affected_rows
from modelport.store.tables import BlobOwnerRow, BlobRow, UploadRow


def _upload(row: UploadRow) -> Upload:
    return Upload(row.id, row.offset, row.created_at, row.updated_at, row.expires_at, row.tenant)


def add_upload(session: Session, upload: Upload) -> None:
    session.execute(
        insert(UploadRow).values(
            id=upload.id,
            offset=upload.offset,
            created_at=upload.created_at,
            updated_at=upload.updated_at,
            expires_at=upload.expires_at,
            tenant=upload.tenant,
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
    return bool(affected_rows(result))


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
            UploadRow.tenant,
        )
    ).one_or_none()
    return None if row is None else Upload(*row)


def remove_upload(session: Session, upload_id: str) -> bool:
    result = session.execute(delete(UploadRow).where(UploadRow.id == upload_id))
    return bool(affected_rows(result))


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
    return bool(affected_rows(result))


def existing_upload_ids(session: Session, upload_ids: Sequence[str]) -> set[str]:
    if not upload_ids:
        return set()
    return set(session.scalars(select(UploadRow.id).where(UploadRow.id.in_(upload_ids))))


def _insert_new(
    session: Session, table: type[BlobRow | BlobOwnerRow], values: dict[str, Any]
) -> None:
    """Insert a row unless one with its primary key exists (then do nothing)."""
    dialect = session.get_bind().dialect.name
    statement: Insert
    if dialect == "postgresql":
        statement = postgresql.insert(table).values(values).on_conflict_do_nothing()
    elif dialect == "sqlite":
        statement = sqlite.insert(table).values(values).on_conflict_do_nothing()
    else:
        key = tuple(values[c.name] for c in table.__mapper__.primary_key)
        if session.get(table, key) is not None:
            return
        statement = insert(table).values(values)
    session.execute(statement)


def record_blob(session: Session, blob: Blob, now: datetime) -> None:
    """Record a committed blob; a second record of the same digest is a no-op."""
    _insert_new(session, BlobRow, {"digest": blob.digest, "size": blob.size, "created_at": now})


def record_owner(session: Session, digests: Iterable[str], tenant: str, now: datetime) -> None:
    """Record that ``tenant`` holds the bytes of each of ``digests`` (again: a no-op)."""
    for digest in sorted(set(digests)):  # one order for every writer: no deadlocks
        _insert_new(session, BlobOwnerRow, {"digest": digest, "tenant": tenant, "created_at": now})


def held_by(session: Session, tenant: str, digests: Iterable[str]) -> set[str]:
    """Which of ``digests`` ``tenant`` holds (uploaded, or held when possession began)."""
    wanted = set(digests)
    if not wanted:
        return set()
    return set(
        session.scalars(
            select(BlobOwnerRow.digest).where(
                BlobOwnerRow.tenant == tenant, BlobOwnerRow.digest.in_(wanted)
            )
        )
    )


def recorded_blob(session: Session, digest: str) -> Blob | None:
    row = session.get(BlobRow, digest)
    return None if row is None else Blob(row.digest, row.size)
