"""A batch job's progress: rows done and failed in its checkpointed shards, its rows in
all, and when it should end at the pace so far. Jobs of other pipelines have none."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select

from modelport.blobs.service import BlobService
from modelport.errors import ModelportError
from modelport.jobs import parquet, shards
from modelport.jobs.readers import NpyRows
from modelport.jobs.types import Job, JobState, Progress
from modelport.store.database import Database
from modelport.store.tables import BatchRow

SHARDING = frozenset({"batch_shards", "tensor_shards"})


def npy_rows(blobs: BlobService, digest: str) -> int | None:
    """The rows of a stored ``.npy`` file, from its header alone (None: not one)."""
    try:
        # Unverified: a status page polled while the job runs must not hash the file
        # (up to VERIFY_BELOW_BYTES) on every poll; the stage verifies what it scores.
        return NpyRows.open(blobs, digest, verify=False).rows
    except ModelportError:  # a file that is not .npy of rows: the stage says why
        return None


def file_rows(blobs: BlobService, digest: str) -> int | None:
    """The rows of a stored tensor batch file, ``.npy`` or Parquet (from its footer);
    None when it is neither."""
    rows = npy_rows(blobs, digest)
    if rows is not None:
        return rows
    try:
        with parquet.open_blob(blobs, digest, verify=False) as source:
            return parquet.count_rows(source)
    except Exception:  # a blob gone or unreadable: the stage says why
        return None


def progress(database: Database, blobs: BlobService, job: Job, now: datetime) -> Progress | None:
    if not any(spec.implementation in SHARDING for spec in job.pipeline):
        return None
    with database.transaction() as session:
        done, failed = shards.progress(session, job.id)
        total = session.scalar(select(BatchRow.total).where(BatchRow.job_id == job.id))
    if total is None and job.target_kind != "batch":
        total = file_rows(blobs, job.input_digest)
    estimate = None
    if job.state is JobState.RUNNING and job.started_at is not None and total and done > 0:
        elapsed = now - job.started_at
        estimate = job.started_at + elapsed * (total / done)
    return Progress(total, done, failed, estimate)
