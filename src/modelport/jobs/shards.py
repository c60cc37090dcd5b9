"""Queries of the ``batches`` and ``batch_shards`` tables. A shard's checkpoint is inserted once (its key is the job and the
shard's position): a second runner finishing the same shard finds it there and keeps
the first."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import and_, func, or_, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from modelport.jobs.repository import holds
from modelport.jobs.types import Lease, LeaseLost, ShardCheckpoint
from modelport.store.database import Database
from modelport.store.tables import BatchRow, BatchShardRow


def checkpoints(session: Session, job_id: str) -> list[ShardCheckpoint]:
    rows = session.scalars(
        select(BatchShardRow).where(BatchShardRow.job_id == job_id).order_by(BatchShardRow.position)
    ).all()
    return [
        ShardCheckpoint(r.position, r.rows, r.failed, r.output_digest, r.error_digest) for r in rows
    ]


def progress(session: Session, job_id: str) -> tuple[int, int]:
    """Rows answered and rows failed in the job's checkpointed shards."""
    done, failed = session.execute(
        select(
            func.coalesce(func.sum(BatchShardRow.rows), 0),
            func.coalesce(func.sum(BatchShardRow.failed), 0),
        ).where(BatchShardRow.job_id == job_id)
    ).one()
    return int(done), int(failed)


def checkpoint(
    database: Database,
    job_id: str,
    shard: ShardCheckpoint,
    now: datetime,
    lease: Lease | None = None,
) -> bool:
    """Record a finished shard; False when it was recorded already (kept as it was).
    With the runner's ``lease``, only while it is still the job's: ``LeaseLost`` (nothing
    written) once another runner took the job over."""
    try:
        with database.transaction() as session:
            if lease is not None and not holds(session, lease):
                raise LeaseLost(f"job {job_id}: lease {lease.generation} was taken over")
            session.add(
                BatchShardRow(
                    job_id=job_id,
                    position=shard.position,
                    rows=shard.rows,
                    failed=shard.failed,
                    output_digest=shard.output_digest,
                    error_digest=shard.error_digest,
                    created_at=now,
                )
            )
    except IntegrityError:
        return False
    return True


def deadline(session: Session, job_id: str, windows: Mapping[str, timedelta]) -> datetime | None:
    """When the batch of job ``job_id`` expires: its creation plus its completion
    window (None: the job is no batch of ``/v1/batches``, or its window is unknown)."""
    found = session.execute(
        select(BatchRow.created_at, BatchRow.completion_window).where(BatchRow.job_id == job_id)
    ).first()
    if found is None or found[1] not in windows:
        return None
    created = found[0] if found[0].tzinfo is not None else found[0].replace(tzinfo=UTC)
    return created + windows[found[1]]


def add_batch(session: Session, row: BatchRow) -> None:
    session.add(row)
    session.flush()


def get_batch(session: Session, tenant: str | None, batch_id: str) -> BatchRow | None:
    row = session.get(BatchRow, batch_id)
    if row is None or (tenant is not None and row.tenant != tenant):
        return None
    return row


def page(session: Session, tenant: str, after: BatchRow | None, limit: int) -> list[BatchRow]:
    """Up to ``limit + 1`` of the tenant's batches, newest first, after ``after``."""
    query = select(BatchRow).where(BatchRow.tenant == tenant)
    if after is not None:
        at, key = after.created_at, after.id
        query = query.where(
            or_(BatchRow.created_at < at, and_(BatchRow.created_at == at, BatchRow.id < key))
        )
    query = query.order_by(BatchRow.created_at.desc(), BatchRow.id.desc()).limit(limit + 1)
    return list(session.scalars(query).all())


def metadata_of(row: BatchRow) -> dict[str, Any] | None:
    return None if row.batch_metadata is None else dict(row.batch_metadata)
