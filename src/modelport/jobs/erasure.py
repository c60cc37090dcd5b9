"""Erasing jobs' inputs and outputs: past their tenant's retention, or all of a tenant's
at once (the right to deletion).

An erased job keeps its record (id, tenant, target, pipeline, state, times, errors, its
stages' attempts and a batch's shards' row counts: what billing and the audit need; its
usage events are the ledger's and stay there) and loses every payload: its input and output digests and its
stages' and shards' are cleared, and a batch's input, output and error files are
deleted. Its output then answers 410 ``erased``.

Two steps, so that a crash leaves a state the next sweep finishes:

1. one transaction clears the job's digests, deletes its files, stamps ``erased_at``
   and queues each digest it dropped in ``blob_erasures``;
2. then each queued digest that nothing lists any more (no job, stage, shard, file,
   model version or asset version, no dataset's split, and no other tenant holds it: storage is
   content-addressed and shared) loses its ``blobs`` and ``blob_owners`` rows and then
   its bytes; its queue row goes last. A digest still listed elsewhere only leaves the
   queue: the bytes are someone else's too.

Only finished jobs are erased (a running one still reads its input), and not the
platform's own (a version's validation, an evaluation: they run over published assets,
not a caller's data).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta

from sqlalchemy import ColumnElement, Text, cast, delete, exists, func, select, update
from sqlalchemy.orm import Session

from modelport.blobs.interface import BlobStore
from modelport.jobs.batch import published_file_id
from modelport.jobs.types import INTERNAL_STAGES, TERMINAL
from modelport.store import Database
from modelport.store.tables import (
    BatchRow,
    BatchShardRow,
    BlobErasureRow,
    BlobOwnerRow,
    BlobRow,
    DatasetVersionRow,
    FileRow,
    JobRow,
    JobStageRow,
    ModelVersionRow,
    PromptTemplateVersionRow,
    VersionFileRow,
)

__all__ = ["JobErasure"]

_log = logging.getLogger(__name__)
_BATCH = 100
"""Jobs erased per transaction: a long backlog never holds one huge transaction."""
_FINISHED = [state.value for state in TERMINAL]


class JobErasure:
    """Erases finished jobs' inputs and outputs (see the module docstring); the data
    ``observability.retention`` calls ``jobs``."""

    kind = "jobs"

    def __init__(
        self, database: Database, store: BlobStore, *, now: Callable[[], datetime]
    ) -> None:
        self.database = database
        self.store = store
        self._now = now

    def sweep(self, days: Mapping[str, int], default_days: int) -> dict[str, int]:
        """Erase every job finished longer ago than its tenant's retention (``days`` by
        tenant; ``default_days`` for the others). Jobs erased, by tenant."""
        now = self._now()
        erased: dict[str, int] = {}
        for tenant, kept in days.items():
            self._erase(
                erased,
                (JobRow.tenant == tenant) & (JobRow.finished_at < now - timedelta(days=kept)),
            )
        others = JobRow.finished_at < now - timedelta(days=default_days)
        if days:
            others = others & JobRow.tenant.not_in(list(days))
        self._erase(erased, others)
        gone = self.purge()
        if erased or gone:
            _log.info("job retention erased=%s blobs=%d", erased, gone)
        return erased

    def forget(self, tenant: str) -> dict[str, int]:
        """Erase every finished job of ``tenant`` now: ``jobs`` erased, and
        ``jobs_unfinished``, its jobs still queued or running (left as they are: cancel
        them and ask again)."""
        erased: dict[str, int] = {}
        self._erase(erased, JobRow.tenant == tenant)
        gone = self.purge()
        with self.database.transaction() as session:
            unfinished = session.scalar(
                select(func.count())
                .select_from(JobRow)
                .where(JobRow.tenant == tenant, JobRow.state.not_in(_FINISHED))
            )
        jobs = erased.get(tenant, 0)
        _log.info("jobs forgotten tenant=%s erased=%d blobs=%d", tenant, jobs, gone)
        return {"jobs": jobs, "jobs_unfinished": int(unfinished or 0)}

    def purge(self) -> int:
        """Delete the bytes of the queued digests nothing lists any more (step 2); how
        many blobs went. Also finishes what a crash left queued."""
        gone = 0
        with self.database.transaction() as session:
            queued = session.execute(select(BlobErasureRow.digest, BlobErasureRow.tenant)).all()
        for digest, tenant in queued:
            with self.database.transaction() as session:
                orphan = not _listed(session, digest, tenant)
                if orphan:
                    session.execute(delete(BlobOwnerRow).where(BlobOwnerRow.digest == digest))
                    session.execute(delete(BlobRow).where(BlobRow.digest == digest))
            if orphan:
                self.store.delete(digest)
                gone += 1
            with self.database.transaction() as session:
                session.execute(
                    delete(BlobErasureRow).where(
                        BlobErasureRow.digest == digest, BlobErasureRow.tenant == tenant
                    )
                )
        return gone

    def _erase(self, erased: dict[str, int], where: ColumnElement[bool]) -> None:
        after = 0  # by ``seq``: the platform's own jobs, passed over, are not chosen again
        while True:
            with self.database.transaction() as session:
                chosen = session.execute(
                    select(JobRow.seq, JobRow.id, JobRow.tenant, JobRow.pipeline)
                    .where(
                        where,
                        JobRow.seq > after,
                        JobRow.erased_at.is_(None),
                        JobRow.state.in_(_FINISHED),
                    )
                    .order_by(JobRow.seq)
                    .limit(_BATCH)
                    .with_for_update(skip_locked=True)
                ).all()
                now = self._now()
                for seq, job_id, tenant, pipeline in chosen:
                    after = seq
                    if _internal(pipeline):
                        continue
                    _erase_job(session, job_id, tenant, now)
                    erased[tenant] = erased.get(tenant, 0) + 1
            if len(chosen) < _BATCH:
                return


def _internal(pipeline: list[dict[str, object]]) -> bool:
    return any(doc.get("implementation") in INTERNAL_STAGES for doc in pipeline)


def _erase_job(session: Session, job_id: str, tenant: str, now: datetime) -> None:
    """Step 1 for one job: clear its digests, delete its files, queue what it dropped."""
    digests: set[str] = set()
    job = session.scalars(select(JobRow).where(JobRow.id == job_id)).one()
    digests.add(job.input_digest)
    if job.output_digest:
        digests.add(job.output_digest)
    digests |= {
        d
        for d in session.scalars(
            select(JobStageRow.output_digest).where(JobStageRow.job_id == job_id)
        )
        if d
    }
    for output, errors in session.execute(
        select(BatchShardRow.output_digest, BatchShardRow.error_digest).where(
            BatchShardRow.job_id == job_id
        )
    ):
        digests |= {output, errors}
    file_ids = [published_file_id(job_id, "output"), published_file_id(job_id, "error")]
    batch_input = session.scalar(select(BatchRow.input_file_id).where(BatchRow.job_id == job_id))
    if batch_input is not None:
        file_ids.append(batch_input)
    files = select(FileRow.digest).where(FileRow.id.in_(file_ids), FileRow.tenant == tenant)
    digests |= set(session.scalars(files))
    session.execute(delete(FileRow).where(FileRow.id.in_(file_ids), FileRow.tenant == tenant))
    # A shard's rows and failures stay (the batch's counts); its outputs go.
    session.execute(
        update(BatchShardRow)
        .where(BatchShardRow.job_id == job_id)
        .values(output_digest="", error_digest="")
    )
    session.execute(
        update(JobStageRow).where(JobStageRow.job_id == job_id).values(output_digest=None)
    )
    job.input_digest, job.output_digest, job.erased_at = "", None, now
    for digest in sorted(d for d in digests if d):
        if session.get(BlobErasureRow, (digest, tenant)) is None:
            session.add(BlobErasureRow(digest=digest, tenant=tenant, queued_at=now))


def _listed(session: Session, digest: str, tenant: str) -> bool:
    """Whether anything but ``tenant``'s possession still lists ``digest``."""
    uses = (
        select(JobRow.id).where((JobRow.input_digest == digest) | (JobRow.output_digest == digest)),
        select(JobStageRow.job_id).where(JobStageRow.output_digest == digest),
        select(BatchShardRow.job_id).where(
            (BatchShardRow.output_digest == digest) | (BatchShardRow.error_digest == digest)
        ),
        select(FileRow.id).where(FileRow.digest == digest),
        select(VersionFileRow.digest).where(VersionFileRow.digest == digest),
        select(ModelVersionRow.manifest_digest).where(ModelVersionRow.manifest_digest == digest),
        select(DatasetVersionRow.digest).where(DatasetVersionRow.digest == digest),
        select(PromptTemplateVersionRow.digest).where(PromptTemplateVersionRow.digest == digest),
        select(BlobOwnerRow.digest).where(
            BlobOwnerRow.digest == digest, BlobOwnerRow.tenant != tenant
        ),
    )
    if any(session.scalar(select(exists(query))) for query in uses):
        return True
    # A dataset's split files are listed only in its manifest: a job over the same bytes
    # must not take them from the dataset. Only the splits' file digests count (not a
    # text match: a manifest's description is the tenant's to write).
    candidates = select(DatasetVersionRow.manifest).where(
        cast(DatasetVersionRow.manifest, Text).contains(digest, autoescape=True)
    )
    return any(
        isinstance(split, dict) and (split.get("file") or {}).get("digest") == digest
        for manifest in session.scalars(candidates)
        for split in (manifest or {}).get("splits", [])
    )
