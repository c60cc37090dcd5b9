"""Jobs as a tenant sees them: submit, get, list, cancel.

A job belongs to its submitter's tenant; another tenant gets 404 ``job_not_found`` for
it, exactly as for one that does not exist (``tenant`` None: the platform operator,
who sees every job). Submitting with an ``Idempotency-Key``: the same key with the same
request answers the job it made; with another request, 409 ``idempotency_key_reused``.
A tenant whose jobs queued and running reach its job quota (its ``jobs`` limit) is
refused a new one: 429 ``job_quota_exceeded`` (a resubmission of a key seen before
answers its job, never refused).
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import anyio.to_thread
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from modelport.blobs.service import BlobService
from modelport.digests import check_digest
from modelport.errors import Conflict, InvalidInput, NotFound, Overloaded
from modelport.ids import unique_id
from modelport.inference.service import InferenceService
from modelport.jobs import repository as repo
from modelport.jobs import tensors
from modelport.jobs.dataset_input import check_features
from modelport.jobs.principals import principal_doc
from modelport.jobs.progress import progress as batch_progress
from modelport.jobs.queue import JobQueue
from modelport.jobs.runner import JobNotifier, NoNotifier
from modelport.jobs.stages import StageRegistry, declared, parse_target
from modelport.jobs.types import (
    DEFAULT_PIPELINE,
    INTERNAL_STAGES,
    MODERATE_INPUT,
    MODERATE_OUTPUT,
    TERMINAL,
    DatasetSplits,
    Job,
    JobPage,
    JobState,
    NewJob,
    Progress,
    StageSpec,
)
from modelport.observability import tracing
from modelport.store import Database
from modelport.tenancy.types import Principal

_log = logging.getLogger(__name__)
MAX_PAGE = 100
QUOTA_RETRY_SECONDS = 5
"""``Retry-After`` of a job refused by its tenant's quota: a job's end is not foreseen."""


def job_not_found(job_id: str) -> NotFound:
    return NotFound(f"job '{job_id}' not found", code="job_not_found", job=job_id)


@dataclass(frozen=True)
class Submission:
    """What a caller asks for."""

    target_kind: str
    """``model`` or ``endpoint`` (``batch``: a batch over a file, ``jobs.batch``)."""
    target: str
    inputs: list[Any] | None = None
    """OIP-v2-style JSON tensors, inline."""
    input_digest: str | None = None
    """Or: a blob the caller's tenant holds, with the same document as its bytes
    (``{"inputs": [...], "parameters"?, "outputs"?}``)."""
    parameters: dict[str, Any] | None = None
    outputs: list[str] | None = None
    """Outputs asked of the model (None: every one)."""
    pipeline: Sequence[StageSpec] | None = None
    """None: validate → infer → postprocess."""
    select: list[str] | None = None
    rename: dict[str, str] | None = None
    """The default pipeline's postprocess options."""
    webhook: str | None = None
    idempotency_key: str | None = None
    dataset: str | None = None
    """Or: a dataset version (``owner/name:version``) the caller may read, whose
    ``split`` a tensor batch pipeline reads (``jobs.tensor_batch``)."""
    split: str | None = None


class JobService:
    def __init__(
        self,
        database: Database,
        blobs: BlobService,
        stages: StageRegistry,
        queue: JobQueue,
        *,
        now: Callable[[], datetime],
        notifier: JobNotifier | None = None,
        submitted: Callable[[], None] | None = None,
        moderated: Callable[[str], bool] | None = None,
        release_hold: Callable[[str], None] | None = None,
        cancelled: Callable[[str], None] | None = None,
        inference: InferenceService | None = None,
    ) -> None:
        self.database = database
        self.blobs = blobs
        self.stages = stages
        self.queue = queue
        self.now = now
        self.notifier: JobNotifier = notifier or NoNotifier()
        self.submitted = submitted
        """Called after a new job commits (this process's runner looks for work)."""
        self.cancelled = cancelled
        """Called with a running job's id once its cancel commits (this process's runner
        stops a stage of it that can stop early)."""
        self.moderated = moderated or (lambda tenant: False)
        """Whether a tenant has an active moderation policy: its default pipeline then
        moderates the inputs and the outputs (``jobs.moderate``)."""
        self.inference = inference
        """Where a dataset split's columns are checked against the target's inputs at
        submission (None: only when the shards start)."""
        self.datasets: DatasetSplits | None = None
        """Where a job over a dataset split finds it (set where datasets are built)."""
        self.release_hold = release_hold
        """Gives back a queued job's upfront hold when it is cancelled (``jobs.billing``:
        a runner that stopped cleanly gave the job back holding it)."""

    def submit(
        self, principal: Principal, submission: Submission, *, internal: bool = False
    ) -> tuple[Job, bool]:
        """Store a new job (or, with an idempotency key seen before, find its job); the
        job and whether it is new. ``internal``: a platform service's own job, whose
        pipeline may name ``INTERNAL_STAGES`` (an evaluation's)."""
        tenant = principal.tenant
        if tenant is None:
            raise InvalidInput(
                "a job runs in a tenant: submit it with a key of the tenant",
                code="tenant_required",
            )
        if submission.target_kind == "batch":
            # A batch (``jobs.batch``): its lines name their models; its target is the
            # route they call, and it runs the batch pipeline only.
            if submission.pipeline is None:
                raise InvalidInput("a batch job needs its pipeline", code="invalid_pipeline")
        elif submission.target_kind not in ("model", "endpoint"):
            raise InvalidInput(
                "target kind must be 'model' or 'endpoint'", code="invalid_target", field="target"
            )
        else:
            parse_target(submission.target_kind, submission.target)
        if submission.webhook is not None:
            self.notifier.check_webhook(submission.webhook)
        pipeline = self._pipeline(tenant, submission, internal=internal)
        if submission.dataset is not None:
            input_digest, pipeline = self._split_input(principal, submission, pipeline)
        else:
            input_digest = self._inputs(tenant, submission)
        fingerprint = _fingerprint(submission, input_digest, pipeline)
        key = submission.idempotency_key
        if key is not None:
            found = self._by_key(tenant, key, fingerprint)
            if found is not None:
                return found, False
        job = NewJob(
            id=unique_id(),
            tenant=tenant,
            principal=principal_doc(principal),
            target_kind=submission.target_kind,
            target=submission.target,
            input_digest=input_digest,
            pipeline=pipeline,
            webhook=submission.webhook,
            idempotency_key=key,
            fingerprint=fingerprint,
            created_at=self.now(),
            # The submitting request's trace, continued by the job's stages where they run.
            trace_context=tracing.carrier() or None,
        )
        try:
            with self.database.transaction() as session:
                _check_quota(session, tenant)
                repo.add_job(session, job)
        except (IntegrityError, Overloaded):
            if key is None:
                raise
            found = self._by_key(tenant, key, fingerprint)  # a concurrent twin won
            if found is None:
                raise
            return found, False
        if self.submitted is not None:
            self.submitted()
        return self.get(tenant, job.id), True

    async def submit_checked(
        self, principal: Principal, submission: Submission
    ) -> tuple[Job, bool]:
        """``submit`` on a worker thread; a dataset split's feature columns checked first
        against the target's inputs (400 ``column_mismatch``), the stage checking them
        again when it runs."""
        if (
            submission.dataset is not None
            and self.datasets is not None
            and self.inference is not None
            and submission.target_kind in ("model", "endpoint")
        ):
            target = parse_target(submission.target_kind, submission.target)
            found = await anyio.to_thread.run_sync(
                self.datasets.split_input, principal, submission.dataset, submission.split or ""
            )
            inputs, _ = await declared(self.inference, principal, target)
            check_features(found, inputs)
        return await anyio.to_thread.run_sync(self.submit, principal, submission)

    def get(self, tenant: str | None, job_id: str, *, kind: str | None = None) -> Job:
        """The job, if ``tenant`` may see it (None: any) and it is of ``kind`` (None:
        any)."""
        with self.database.transaction() as session:
            job = repo.get_job(session, job_id) if len(job_id) <= 64 else None
        if job is None or (tenant is not None and job.tenant != tenant):
            raise job_not_found(job_id)
        if kind is not None and job.target_kind != kind:
            raise job_not_found(job_id)
        return job

    def list(
        self,
        tenant: str | None,
        *,
        state: JobState | None = None,
        target: str | None = None,
        cursor: str | None = None,
        limit: int = 50,
        kind: str | None = None,
    ) -> JobPage:
        """Jobs newest first; pass ``next_cursor`` back as ``cursor`` for the next page."""
        before = None
        if cursor is not None:
            if not (cursor.isascii() and cursor.isdigit()) or len(cursor) > 18:
                raise InvalidInput(
                    "invalid cursor: pass back the next_cursor of a previous page",
                    code="invalid_cursor",
                    field="cursor",
                )
            before = int(cursor)
        limit = max(1, min(limit, MAX_PAGE))
        with self.database.transaction() as session:
            items, more = repo.list_jobs(
                session,
                tenant=tenant,
                state=state,
                target=target,
                before_seq=before,
                limit=limit,
                kind=kind,
            )
        return JobPage(items, None if more is None else str(more))

    def cancel(self, tenant: str | None, job_id: str, *, kind: str | None = None) -> Job:
        """Stop the job at its next stage boundary (a queued job at once; a stage that
        can stop early, a validation, at once); 409 ``job_finished`` for a job that
        already ended."""
        job = self.get(tenant, job_id, kind=kind)
        with self.database.transaction() as session:
            state = repo.request_cancel(session, job.id)
        if state is None:
            raise job_not_found(job_id)
        if state in TERMINAL:
            raise Conflict(
                f"job '{job_id}' already ended ({state.value})",
                code="job_finished",
                state=state.value,
            )
        if state is JobState.QUEUED and self.queue.finish(
            job.id, None, JobState.CANCELLED, on_end=self.notifier.job_finished
        ):
            self.notifier.wake()  # the notice committed with the cancel
            if self.release_hold is not None:
                try:
                    self.release_hold(job.id)
                except Exception:  # the hold expires on its own (``Reservations.sweep``)
                    _log.exception("giving back the hold of job %s failed", job_id)
            return self.get(tenant, job_id, kind=kind)
        if state is JobState.RUNNING and self.cancelled is not None:
            self.cancelled(job.id)
        return self.get(tenant, job_id, kind=kind)

    def progress(self, job: Job) -> Progress | None:
        """A batch job's rows done, failed and in all, and its estimated end (None for
        a job of another pipeline)."""
        return batch_progress(self.database, self.blobs, job, self.now())

    def output(self, job: Job) -> dict[str, Any] | None:
        """The job's output document (the last stage's), once it succeeded."""
        if job.output_digest is None:
            return None
        return tensors.loads(self.blobs.get(job.output_digest))

    # ---- parts
    def _pipeline(
        self, tenant: str, submission: Submission, *, internal: bool = False
    ) -> tuple[StageSpec, ...]:
        if submission.pipeline is None:
            params: dict[str, Any] = {}
            if submission.select is not None:
                params["select"] = list(submission.select)
            if submission.rename:
                params["rename"] = dict(submission.rename)
            validate, infer, post = DEFAULT_PIPELINE
            post = dataclasses.replace(post, params=params)
            if self.moderated(tenant):
                return (validate, MODERATE_INPUT, infer, MODERATE_OUTPUT, post)
            return (validate, infer, post)
        pipeline = tuple(submission.pipeline)
        if not pipeline:
            raise InvalidInput("a pipeline needs a stage", code="invalid_pipeline")
        names = [spec.name for spec in pipeline]
        if len(set(names)) != len(names):
            raise InvalidInput("stage names must be unique", code="invalid_pipeline")
        for spec in pipeline:
            if spec.implementation not in self.stages or (
                spec.implementation in INTERNAL_STAGES and not internal
            ):
                raise InvalidInput(
                    f"unknown stage implementation '{spec.implementation}'; there are "
                    f"{', '.join(self.stages.names())}",
                    code="unknown_stage",
                )
            if spec.retries < 0 or spec.backoff_seconds < 0 or spec.timeout_seconds <= 0:
                raise InvalidInput(
                    f"stage '{spec.name}': retries and backoff must be >= 0, timeout > 0",
                    code="invalid_pipeline",
                )
        return pipeline

    def _inputs(self, tenant: str, submission: Submission) -> str:
        if (submission.inputs is None) == (submission.input_digest is None):
            raise InvalidInput(
                "give either 'inputs' or 'input_digest'", code="invalid_job_input", field="inputs"
            )
        if submission.input_digest is not None:
            digest = check_digest(submission.input_digest)
            if not self.blobs.held_by(tenant, digest):
                raise NotFound(f"blob '{digest}' not found", code="blob_not_found", digest=digest)
            return digest
        doc: dict[str, Any] = {"inputs": submission.inputs}
        if submission.parameters:
            doc["parameters"] = submission.parameters
        if submission.outputs is not None:
            doc["outputs"] = submission.outputs
        return self.blobs.put(tensors.dumps(doc), tenant=tenant)

    def _split_input(
        self, principal: Principal, submission: Submission, pipeline: tuple[StageSpec, ...]
    ) -> tuple[str, tuple[StageSpec, ...]]:
        """A dataset split as the input of a tensor batch: the caller may read it (404
        otherwise), the split exists (400 ``unknown_split``); the split's file is the job's
        input and the version's digest is recorded in the ``tensor_shards`` stage's
        params."""
        if submission.inputs is not None or submission.input_digest is not None:
            raise InvalidInput(
                "give one of 'inputs', 'input_digest' or 'input_dataset'",
                code="invalid_job_input",
                field="input_dataset",
            )
        shards = [i for i, spec in enumerate(pipeline) if spec.implementation == "tensor_shards"]
        if not shards:
            raise InvalidInput(
                "a dataset split feeds a tensor batch: name the 'tensor_shards' stage",
                code="invalid_job_input",
                field="input_dataset",
            )
        if self.datasets is None:
            raise InvalidInput("datasets are not served here", code="invalid_job_input")
        found = self.datasets.split_input(
            principal, submission.dataset or "", submission.split or ""
        )
        params = {
            **pipeline[shards[0]].params,
            "dataset": found.dataset,
            "split": found.split,
            "dataset_digest": found.digest,
        }
        stages = list(pipeline)
        for i in shards:
            stages[i] = dataclasses.replace(stages[i], params=params)
        return found.file_digest, tuple(stages)

    def _by_key(self, tenant: str, key: str, fingerprint: str) -> Job | None:
        with self.database.transaction() as session:
            found = repo.by_idempotency_key(session, tenant, key)
        if found is not None and found.fingerprint != fingerprint:
            raise Conflict(
                "this Idempotency-Key was used with another request",
                code="idempotency_key_reused",
            )
        return found


def _check_quota(session: Session, tenant: str) -> None:
    """Refuse a job over the tenant's quota (counted under the lock ``job_quota`` takes
    until the job is added in the same transaction)."""
    quota = repo.job_quota(session, tenant)
    if quota is not None and quota[1] >= quota[0]:
        limit, active = quota
        raise Overloaded(
            f"tenant {tenant!r} has {active} jobs queued or running, its quota of {limit}: "
            "submit again once one ends",
            code="job_quota_exceeded",
            limit=limit,
            retry_after=QUOTA_RETRY_SECONDS,
        )


def _fingerprint(submission: Submission, input_digest: str, pipeline: Sequence[StageSpec]) -> str:
    doc = {
        "target": [submission.target_kind, submission.target],
        "input": input_digest,
        "pipeline": [spec.to_doc() for spec in pipeline],
        "webhook": submission.webhook,
    }
    return "sha256:" + hashlib.sha256(tensors.dumps(doc)).hexdigest()
