"""A batch job's progress: rows done and failed in its checkpointed shards, its rows in
all, and when it should end at the pace so far. Jobs of other pipelines have none."""

from __future__ import annotations

import io
from datetime import datetime

import numpy as np
from sqlalchemy import select

from modelport.blobs.service import BlobService
from modelport.jobs import parquet, shards
from modelport.jobs.types import Job, JobState, Progress
from modelport.store.database import Database
from modelport.store.tables import BatchRow

SHARDING = frozenset({"batch_shards", "tensor_shards"})
_HEADER_BYTES = 1 << 16


def npy_rows(blobs: BlobService, digest: str) -> int | None:
    """The rows of a stored ``.npy`` file, from its header alone (None: not one)."""
    try:
        blob = blobs.stat(digest)
        stream = io.BytesIO(b"".join(blobs.read(blob, 0, _HEADER_BYTES)))
        version = np.lib.format.read_magic(stream)
        if version == (1, 0):
            shape, _, _ = np.lib.format.read_array_header_1_0(stream)
        else:
            shape, _, _ = np.lib.format.read_array_header_2_0(stream)
    except Exception:  # a file that is not .npy: the stage says why
        return None
    return int(shape[0]) if shape else None


def file_rows(blobs: BlobService, digest: str) -> int | None:
    """The rows of a stored tensor batch file, ``.npy`` or Parquet (from its footer);
    None when it is neither."""
    rows = npy_rows(blobs, digest)
    if rows is not None:
        return rows
    try:
        with parquet.open_blob(blobs, digest) as source:
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
