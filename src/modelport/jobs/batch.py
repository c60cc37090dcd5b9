"""Batches over files of requests: a batch is a job whose pipeline is ``shards`` →
``publish`` (``BATCH_PIPELINE``).

- ``shards`` reads the input file a shard of ``shard_rows`` lines at a time, streamed
  from the blob store (``jobs.readers``: never the whole file); each shard
  not checkpointed yet runs its lines (a few at once) through the ``LineRunner`` as the
  submitting principal, each under the metered call id ``batch:<job>:<custom_id>``
  (a line run again after a crash is charged once), stores its output and error lines
  as two blobs and checkpoints the shard (``batch_shards``). A run resumed after a kill
  starts at the first shard not checkpointed. A cancel requested between shards ends
  the stage early, publishing what the shards done answered (as OpenAI does): the job
  ends ``cancelled`` at the boundary, its files in the stage's output.
- A batch not done within its ``completion_window`` (from its creation, on the
  injected clock; checked before each shard) expires: every shard not checkpointed yet
  is checkpointed with its lines as ``batch_expired`` error lines (the ``LineRunner``
  encodes them) and none of them run; ``publish`` then publishes the finished lines'
  output and all the errors, and marks the manifest ``expired``. The job itself ends
  ``succeeded`` (each stage did its work); the batch's status is ``expired``.
- ``publish`` streams the shards' outputs into the output file and the errors
  into the error file (never holding either whole) (ids derived from the job: a publish run again finds them) and
  answers the manifest (file ids, every shard's digests), which the runner records
  with the stage done: the batch shows its files only then, all at once.

The per-line call and its encoding are the surface's (``LineRunner``): this package
knows no request format.
"""

from __future__ import annotations

import asyncio
import hashlib
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from itertools import chain
from typing import Any, Protocol

import anyio.to_thread
import orjson

from modelport.blobs.service import BlobService
from modelport.digests import sha256_digest
from modelport.errors import InvalidInput, NotFound
from modelport.files import FilePurpose, FileService
from modelport.files.batch_lines import BATCH_URLS
from modelport.files.types import BatchLine
from modelport.jobs import readers, shards, tensors
from modelport.jobs import repository as repo
from modelport.jobs.service import JobService, Submission
from modelport.jobs.stages import StageContext
from modelport.jobs.types import (
    BATCH_PIPELINE,
    BatchPage,
    BatchRecord,
    JobState,
    LineOutcome,
    ShardCheckpoint,
)
from modelport.store.database import Database
from modelport.store.tables import BatchRow
from modelport.tenancy.types import Principal

SHARD_ROWS = 1000
LINE_CONCURRENCY = 8
COMPLETION_WINDOWS = {"24h": timedelta(hours=24)}
"""The completion windows a batch may ask for (OpenAI's one), and their lengths."""
MAX_METADATA = 16
MAX_PAGE = 100


class LineRunner(Protocol):
    """Runs one request line of a batch and encodes its answer (the surface's part)."""

    async def run_line(
        self,
        principal: Principal,
        endpoint: str,
        custom_id: str,
        body: dict[str, Any],
        *,
        call_id: str,
        request_id: str,
    ) -> LineOutcome:
        """The line's output line, or its error line for a request that failed (an
        unexpected error is raised: the stage is retried)."""
        ...

    def expired_line(self, custom_id: str, *, call_id: str, request_id: str) -> LineOutcome:
        """The error line of a request never run: its batch expired first. Its error
        code is ``batch_expired``, written ``"batch_expired"`` on the line (a run resumed
        after a crash recognizes the shards expired before by it)."""
        ...


def line_call_id(job_id: str, custom_id: str) -> str:
    """A line's metered call id: the same in every run of the job."""
    return f"batch:{job_id}:{custom_id}"


def _joined(lines: list[bytes]) -> bytes:
    return b"".join(line + b"\n" for line in lines)


class ShardStage:
    """The ``batch_shards`` implementation (see the module docstring)."""

    def __init__(
        self,
        database: Database,
        runner: LineRunner,
        *,
        now: Callable[[], datetime],
        concurrency: int = LINE_CONCURRENCY,
        on_shard: Callable[[str, int], None] | None = None,
        publisher: PublishStage | None = None,
    ) -> None:
        self.database = database
        self.runner = runner
        self.publisher = publisher
        """Publishes what a cancelled batch answered (None: nothing is published)."""
        self.now = now
        self.concurrency = concurrency
        self.on_shard = on_shard
        """Told (job id, position) after each shard this process checkpointed."""

    async def run(self, context: StageContext) -> bytes:
        doc = await context.read_input()
        job = context.job
        if not isinstance(doc.get("file"), str) or doc.get("endpoint") not in BATCH_URLS:
            raise InvalidInput(
                "batch_shards runs the batches of /v1/batches only", code="invalid_job_input"
            )
        endpoint = str(doc["endpoint"])
        size = int(doc.get("shard_rows") or SHARD_ROWS)
        done = {c.position for c in await anyio.to_thread.run_sync(self._checkpoints, job.id)}
        deadline = await anyio.to_thread.run_sync(self._deadline, job.id)
        blobs = context.services.blobs
        reader = readers.jsonl_shards(blobs, str(doc["file"]), size, skip=done)
        expired = False
        try:
            while (shard := await anyio.to_thread.run_sync(next, reader, None)) is not None:
                if shard.position in done:
                    continue
                expired = expired or (deadline is not None and self.now() >= deadline)
                if expired:
                    checkpoint = await self._expire(context, shard)
                else:
                    if await anyio.to_thread.run_sync(self._cancelled, job.id):
                        return await self._cancel(context)
                    checkpoint = await self._shard(context, endpoint, shard.position, shard.lines)
                written = await anyio.to_thread.run_sync(
                    shards.checkpoint, self.database, job.id, checkpoint, self.now(), context.lease
                )
                if written and self.on_shard is not None:
                    self.on_shard(job.id, shard.position)
        finally:
            await anyio.to_thread.run_sync(reader.close)
        if await anyio.to_thread.run_sync(self._cancelled, job.id):
            # A cancel wins over the expiry: the job ends cancelled at the boundary,
            # so publish now what was answered and expired.
            return await self._cancel(context)
        recorded = await anyio.to_thread.run_sync(self._checkpoints, job.id)
        if not expired and deadline is not None and self.now() >= deadline:
            # A run before this one (its runner died before the stage was recorded)
            # may have expired shards: they are checkpointed, so nothing was left here.
            expired = await anyio.to_thread.run_sync(_expired_before, blobs, recorded)
        manifest: dict[str, Any] = {"shards": [_shard_doc(c) for c in recorded]}
        if expired:
            manifest["expired"] = True
        return tensors.dumps(manifest)

    async def _expire(self, context: StageContext, shard: readers.Shard) -> ShardCheckpoint:
        """A shard the window closed on: each line a ``batch_expired`` error, none run."""
        job = context.job
        errors = _joined(
            [
                self.runner.expired_line(
                    line.custom_id, call_id=line_call_id(job.id, line.custom_id), request_id=job.id
                ).line
                for line in shard.lines
            ]
        )
        blobs = context.services.blobs
        empty = await anyio.to_thread.run_sync(partial(blobs.put, b"", tenant=job.tenant))
        error_digest = await anyio.to_thread.run_sync(partial(blobs.put, errors, tenant=job.tenant))
        rows = len(shard.lines)
        return ShardCheckpoint(shard.position, rows, rows, empty, error_digest)

    def _deadline(self, job_id: str) -> datetime | None:
        with self.database.transaction() as session:
            return shards.deadline(session, job_id, COMPLETION_WINDOWS)

    async def _cancel(self, context: StageContext) -> bytes:
        """The stage's output once the batch is cancelled: what the shards done so far
        answered, published (as OpenAI does), with ``cancelled`` set; the job ends
        ``cancelled`` at the next boundary."""
        if self.publisher is None:
            return tensors.dumps({"cancelled": True})
        manifest = tensors.loads(await self.publisher.run(context))
        return tensors.dumps({**manifest, "cancelled": True})

    async def _shard(
        self, context: StageContext, endpoint: str, position: int, shard: Sequence[BatchLine]
    ) -> ShardCheckpoint:
        """Run a shard's lines (a few at once) and store its output and error lines."""
        job = context.job
        limit = asyncio.Semaphore(self.concurrency)

        async def one(custom_id: str, body: dict[str, Any]) -> LineOutcome:
            async with limit:
                return await self.runner.run_line(
                    context.principal,
                    endpoint,
                    custom_id,
                    body,
                    call_id=line_call_id(job.id, custom_id),
                    request_id=job.id,
                )

        outcomes = await asyncio.gather(*(one(line.custom_id, line.body) for line in shard))
        output = _joined([o.line for o in outcomes if o.ok])
        errors = _joined([o.line for o in outcomes if not o.ok])
        blobs = context.services.blobs
        output_digest = await anyio.to_thread.run_sync(
            partial(blobs.put, output, tenant=job.tenant)
        )
        error_digest = await anyio.to_thread.run_sync(partial(blobs.put, errors, tenant=job.tenant))
        failed = sum(not o.ok for o in outcomes)
        return ShardCheckpoint(position, len(shard), failed, output_digest, error_digest)

    def _checkpoints(self, job_id: str) -> list[ShardCheckpoint]:
        with self.database.transaction() as session:
            return shards.checkpoints(session, job_id)

    def _cancelled(self, job_id: str) -> bool:
        with self.database.transaction() as session:
            job = repo.get_job(session, job_id, with_stages=False)
        return job is None or job.cancel_requested


EXPIRED_CODE = b'"batch_expired"'


def _expired_before(blobs: BlobService, recorded: Sequence[ShardCheckpoint]) -> bool:
    """Whether a checkpointed shard is one ``_expire`` wrote: no line answered, and its
    first error line carries the ``batch_expired`` code."""
    empty = sha256_digest(b"")
    for c in recorded:
        if c.rows and c.failed == c.rows and c.output_digest == empty:
            head = b"".join(blobs.read(blobs.stat(c.error_digest), 0, 4096))
            if EXPIRED_CODE in head.split(b"\n", 1)[0]:
                return True
    return False


def _shard_doc(c: ShardCheckpoint) -> dict[str, Any]:
    return {
        "index": c.position,
        "rows": c.rows,
        "failed": c.failed,
        "output": c.output_digest,
        "errors": c.error_digest,
    }


def published_file_id(job_id: str, kind: str) -> str:
    """The id of a batch's output (``kind`` ``output``) or error file: derived from its
    job, so a publish run again finds the file it wrote."""
    return "file-" + hashlib.sha256(f"{job_id}:{kind}".encode()).hexdigest()[:24]


class PublishStage:
    """The ``batch_publish`` implementation (see the module docstring)."""

    def __init__(self, database: Database, files: FileService) -> None:
        self.database = database
        self.files = files

    async def run(self, context: StageContext) -> bytes:
        job = context.job
        expired = bool((await context.read_input()).get("expired"))
        found = await anyio.to_thread.run_sync(self._checkpoints, job.id)
        blobs = context.services.blobs
        name = job.id

        def write(kind: str, digests: list[str]) -> str | None:
            # The shards' blobs streamed one after another into the file: the output
            # file is never held whole.
            if not any(blobs.stat(digest).size for digest in digests):
                return None
            file = self.files.write(
                job.tenant,
                FilePurpose.BATCH_OUTPUT,
                f"batch_{name}_{kind}.jsonl",
                chain.from_iterable(blobs.read(blobs.stat(digest)) for digest in digests),
                file_id=published_file_id(job.id, kind),
            )
            return file.id

        outputs, errors = [c.output_digest for c in found], [c.error_digest for c in found]
        output_id = await anyio.to_thread.run_sync(write, "output", outputs)
        error_id = await anyio.to_thread.run_sync(write, "error", errors)
        manifest: dict[str, Any] = {
            "output_file_id": output_id,
            "error_file_id": error_id,
            "rows": sum(c.rows for c in found),
            "failed": sum(c.failed for c in found),
            "shards": [_shard_doc(c) for c in found],
        }
        if expired:
            manifest["expired"] = True
        return tensors.dumps(manifest)

    def _checkpoints(self, job_id: str) -> list[ShardCheckpoint]:
        with self.database.transaction() as session:
            return shards.checkpoints(session, job_id)


@dataclass(frozen=True)
class NewBatch:
    input_file_id: str
    endpoint: str
    completion_window: str = "24h"
    metadata: dict[str, str] | None = None
    shard_rows: int = SHARD_ROWS


def batch_not_found(batch_id: str) -> NotFound:
    return NotFound(f"no batch {batch_id!r}", code="batch_not_found")


class BatchService:
    """Create, get, list and cancel a tenant's batches (a batch is a job of its
    tenant's; another tenant's is ``batch_not_found``, as a missing one is)."""

    def __init__(
        self,
        database: Database,
        jobs: JobService,
        files: FileService,
        *,
        now: Callable[[], datetime],
    ) -> None:
        self.database = database
        self.jobs = jobs
        self.files = files
        self.now = now

    def create(self, principal: Principal, new: NewBatch) -> BatchRecord:
        tenant = principal.tenant
        if tenant is None:
            raise InvalidInput("a batch runs in a tenant", code="tenant_required")
        if new.endpoint not in BATCH_URLS:
            raise InvalidInput(
                f"endpoint must be one of {sorted(BATCH_URLS)}",
                code="invalid_endpoint",
                param="endpoint",
            )
        if new.completion_window not in COMPLETION_WINDOWS:
            raise InvalidInput(
                "completion_window must be '24h'",
                code="invalid_completion_window",
                param="completion_window",
            )
        _check_metadata(new.metadata)
        if not 1 <= new.shard_rows <= 100_000:
            raise InvalidInput("shard_rows must be 1 to 100000", code="invalid_shard_rows")
        file = self.files.get(tenant, new.input_file_id)
        if file.purpose is not FilePurpose.BATCH or file.lines is None:
            raise InvalidInput(
                f"file {file.id!r} is not a batch file (purpose 'batch')",
                code="invalid_input_file",
                param="input_file_id",
            )
        first = readers.first_line(self.jobs.blobs, file.digest)
        if first is None or first.url != new.endpoint:
            raise InvalidInput(
                f"the file's requests are not for {new.endpoint}",
                code="endpoint_mismatch",
                param="endpoint",
            )
        doc = {"file": file.digest, "endpoint": new.endpoint, "shard_rows": new.shard_rows}
        digest = self.jobs.blobs.put(tensors.dumps(doc), tenant=tenant)
        job, _ = self.jobs.submit(
            principal,
            Submission(
                target_kind="batch",
                target=new.endpoint,
                input_digest=digest,
                pipeline=BATCH_PIPELINE,
            ),
        )
        row = BatchRow(
            id="batch_" + secrets.token_hex(12),
            tenant=tenant,
            job_id=job.id,
            endpoint=new.endpoint,
            input_file_id=file.id,
            completion_window=new.completion_window,
            batch_metadata=new.metadata,
            total=file.lines,
            created_at=job.created_at,
        )
        with self.database.transaction() as session:
            shards.add_batch(session, row)
        return self._record(row)

    def get(self, tenant: str | None, batch_id: str) -> BatchRecord:
        with self.database.transaction() as session:
            row = shards.get_batch(session, tenant, batch_id) if len(batch_id) <= 40 else None
        if row is None:
            raise batch_not_found(batch_id)
        return self._record(row)

    def list(self, tenant: str, *, after: str | None = None, limit: int = 20) -> BatchPage:
        if not 1 <= limit <= MAX_PAGE:
            raise InvalidInput(f"limit must be 1 to {MAX_PAGE}", code="invalid_limit")
        with self.database.transaction() as session:
            start = None
            if after is not None:
                start = shards.get_batch(session, tenant, after) if len(after) <= 40 else None
                if start is None:
                    raise batch_not_found(after)
            rows = shards.page(session, tenant, start, limit)
        return BatchPage([self._record(r) for r in rows[:limit]], has_more=len(rows) > limit)

    def cancel(self, tenant: str, batch_id: str) -> BatchRecord:
        """Stop the batch between shards (a queued one at once); 409 ``job_finished``
        for one that ended."""
        record = self.get(tenant, batch_id)
        self.jobs.cancel(tenant, record.job_id)
        return self.get(tenant, batch_id)

    def _record(self, row: BatchRow) -> BatchRecord:
        job = self.jobs.get(None, row.job_id)
        with self.database.transaction() as session:
            done, failed = shards.progress(session, row.job_id)
        output_id = error_id = None
        expired = False
        published = job.output_digest
        if job.state is JobState.CANCELLED and job.stages:
            published = job.stages[0].output_digest  # what the shards done answered
        if job.state in (JobState.SUCCEEDED, JobState.CANCELLED) and published is not None:
            manifest = orjson.loads(self.jobs.blobs.get(published))
            output_id, error_id = manifest.get("output_file_id"), manifest.get("error_file_id")
            expired = bool(manifest.get("expired"))
        return BatchRecord(
            id=row.id,
            tenant=row.tenant,
            job_id=row.job_id,
            endpoint=row.endpoint,
            input_file_id=row.input_file_id,
            completion_window=row.completion_window,
            metadata=shards.metadata_of(row),
            total=row.total,
            created_at=row.created_at,
            job=job,
            done=done,
            failed=failed,
            output_file_id=output_id,
            error_file_id=error_id,
            expired=expired,
        )


def _check_metadata(metadata: dict[str, str] | None) -> None:
    if metadata is None:
        return
    if (
        not isinstance(metadata, dict)
        or len(metadata) > MAX_METADATA
        or not all(
            isinstance(k, str) and isinstance(v, str) and len(k) <= 64 and len(v) <= 512
            for k, v in metadata.items()
        )
    ):
        raise InvalidInput(
            f"metadata holds at most {MAX_METADATA} string pairs (keys up to 64 characters, "
            "values up to 512)",
            code="invalid_metadata",
            param="metadata",
        )
