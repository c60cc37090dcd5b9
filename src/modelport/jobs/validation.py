"""Validations of versions as jobs: queued, capped, visible, taken over after a crash.

``ValidationJobs.start`` queues a job of kind ``validation`` on ``owner/name:version``,
owned by the publisher's tenant (the model's owner) and run as the requesting
principal. One pipeline stage, ``validate_version`` (``ValidationStage``), calls
``RegistryService.run_validation``: the report is stored on the version as before, and
the version moves to ``validated`` when it passed. The job then ends ``succeeded``, its
output the lifecycle event (``outcome_doc``); a failed validation ends it ``failed``
with ``validation_failed``, the report on the version (``links``). Cancelling the job
while it runs kills the sandboxed child (and all it started) at once: the job ends
``cancelled``, no report is stored and the version keeps its state (a validation that
had finished and was being recorded when the cancel came ends as it would have).

Runners claim validations apart from other jobs (``JobRunner.kind_concurrency``), and
only while fewer than ``VALIDATION_CONCURRENCY`` run across the installation
(``JobRunner.installation_concurrency``: live leases on every runner, counted and
claimed in one decision), at most ``VALIDATION_PROCESS_CONCURRENCY`` of them in one
process: N requests start at most that many sandboxed processes, however many processes
serve, and the rest wait queued. The queue is bounded installation-wide
(``VALIDATION_QUEUE_SIZE`` queued jobs): past it a request is refused with 503
``validation_queue_full`` and a ``Retry-After``. A version with a validation queued or
running already gets that job back, not a second one. A runner that dies leaves its
lease to expire; another runner takes the job over and validates again (the stage is
safe to repeat: a report is appended, the transition checked again).

Validations are not billed (no ``infer`` stage: ``jobs.billing`` holds nothing) and
neither the tenant's ``jobs`` quota nor its ``job_concurrency`` counts them
(``jobs.repository.UNLIMITED_KINDS``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import anyio.to_thread

from modelport.blobs.service import BlobService
from modelport.errors import (
    Conflict,
    Forbidden,
    Internal,
    NotFound,
    Unavailable,
    Unprocessable,
)
from modelport.ids import unique_id
from modelport.jobs import repository as repo
from modelport.jobs.principals import principal_doc
from modelport.jobs.queue import JobQueue
from modelport.jobs.stages import StageContext
from modelport.jobs.types import VALIDATE_VERSION, Job, JobState, NewJob, StageSpec
from modelport.observability import tracing
from modelport.registry.lifecycle import parse_state
from modelport.registry.service import RegistryService
from modelport.registry.types import LifecycleEvent
from modelport.store import Database
from modelport.tenancy.types import Principal

_log = logging.getLogger(__name__)

KIND = repo.VALIDATION
STAGE = VALIDATE_VERSION
QUEUE_RETRY_SECONDS = 10
"""``Retry-After`` of a validation refused by a full queue."""
MARGIN_SECONDS = 300.0
"""Added to the sandbox's own timeout for the stage's: the files are hashed first."""


def version_ref(owner: str, name: str, version: str) -> str:
    return f"{owner}/{name}:{version}"


def split_ref(ref: str) -> tuple[str, str, str]:
    model, _, version = ref.rpartition(":")
    owner, _, name = model.partition("/")
    return owner, name, version


def links(job: Job) -> dict[str, str]:
    """Where a validation job's version and its report are (``/api`` paths)."""
    owner, name, version = split_ref(job.target)
    base = f"/api/models/{owner}/{name}/versions/{version}"
    return {"job": f"/api/jobs/{job.id}", "version": base, "validation": base + "/validation"}


def outcome_doc(event: LifecycleEvent) -> dict[str, Any]:
    """A succeeded validation job's output: the lifecycle event it appended."""
    return {
        "state": event.to_state.value,
        "event": {
            "from": None if event.from_state is None else event.from_state.value,
            "to": event.to_state.value,
            "actor": event.actor,
            "reason": event.reason,
            "created_at": event.created_at.isoformat(),
        },
    }


def event_of(doc: dict[str, Any]) -> LifecycleEvent:
    event = doc["event"]
    return LifecycleEvent(
        from_state=None if event["from"] is None else parse_state(event["from"]),
        to_state=parse_state(event["to"]),
        actor=str(event["actor"]),
        reason=str(event["reason"]),
        created_at=datetime.fromisoformat(event["created_at"]),
    )


class ValidationStage:
    """The ``validate_version`` stage: runs the validation of the job's version."""

    def __init__(self, registry: RegistryService) -> None:
        self.registry = registry

    async def run(self, context: StageContext) -> bytes:
        if context.job.target_kind != KIND:  # only ``ValidationJobs.start`` makes these
            raise Forbidden(f"stage '{STAGE}' runs in validation jobs only", code="unknown_stage")
        owner, name, version = split_ref(context.job.target)
        request = json.loads(await context.read(context.input_digest))
        # In a worker thread. The job's cancel kills the sandboxed child at once and the
        # validation raises ``Cancelled`` having stored nothing; an attempt cancelled
        # otherwise (its timeout) leaves it to end within the sandbox's own time limit.
        event = await anyio.to_thread.run_sync(
            lambda: self.registry.run_validation(
                owner,
                name,
                version,
                actor=str(request["actor"]),
                reason=str(request["reason"]),
                cancel=context.cancel,
            )
        )
        return json.dumps(outcome_doc(event), sort_keys=True).encode()


class ValidationJobs:
    """Queues validations as jobs and waits for their end (see the module docstring)."""

    def __init__(
        self,
        database: Database,
        blobs: BlobService,
        registry: RegistryService,
        queue: JobQueue,
        *,
        now: Callable[[], datetime],
        queue_size: int,
        stage_timeout_seconds: float,
        poll_seconds: float = 1.0,
        submitted: Callable[[], None] | None = None,
    ) -> None:
        self.database = database
        self.blobs = blobs
        self.registry = registry
        self.queue = queue
        self.now = now
        self.queue_size = queue_size
        self.stage_timeout_seconds = stage_timeout_seconds
        self.poll_seconds = poll_seconds
        self.submitted = submitted
        self._waiters: dict[str, list[tuple[asyncio.AbstractEventLoop, asyncio.Event]]] = {}

    def start(
        self, owner: str, name: str, version: str, principal: Principal, *, reason: str = ""
    ) -> tuple[Job, bool]:
        """Queue the version's validation (or find the one queued or running); the job
        and whether it is new. 404 ``version_not_found`` and 409 ``illegal_transition``
        at once; 503 ``validation_queue_full`` when the queue is at its bound."""
        self.registry.check_validatable(owner, name, version)
        target = version_ref(owner, name, version)
        request = {"actor": principal.id, "reason": reason}
        body = json.dumps(request, sort_keys=True).encode()
        input_digest = self.blobs.put(body, tenant=owner)
        spec = StageSpec(
            STAGE, STAGE, retries=0, retryable=False, timeout_seconds=self.stage_timeout_seconds
        )
        with self.database.transaction() as session:
            repo.validation_turn(session)
            found = repo.active_job(session, KIND, target)
            if found is not None:
                return found, False
            queued = repo.queued_count(session, KIND)
            if queued >= self.queue_size:
                raise Unavailable(
                    f"{queued} validations are waiting already, the queue's bound: ask again later",
                    code="validation_queue_full",
                    retry_after=QUEUE_RETRY_SECONDS,
                    queued=queued,
                )
            job = NewJob(
                id=unique_id(),
                tenant=owner,
                principal=principal_doc(principal),
                target_kind=KIND,
                target=target,
                input_digest=input_digest,
                pipeline=(spec,),
                webhook=None,
                idempotency_key=None,
                fingerprint=input_digest,
                created_at=self.now(),
                trace_context=tracing.carrier() or None,
            )
            repo.add_job(session, job)
        if self.submitted is not None:
            self.submitted()
        stored = self.queue.get(job.id)
        assert stored is not None
        return stored, True

    def ended(self, job_id: str) -> None:
        """A runner of this process ended ``job_id``: wake who waits for it."""
        for loop, event in list(self._waiters.get(job_id, [])):
            with contextlib.suppress(RuntimeError):  # its loop closed meanwhile
                loop.call_soon_threadsafe(event.set)

    async def wait(self, job_id: str, seconds: float) -> Job:
        """The job once it ended, or as it is after ``seconds``. Woken at once by this
        process's runner; a job run by another process is seen within ``poll_seconds``."""
        event = asyncio.Event()
        waiter = (asyncio.get_running_loop(), event)
        self._waiters.setdefault(job_id, []).append(waiter)
        # On the injected clock (its wall time): the job's own times are on it too.
        deadline = self.now() + timedelta(seconds=seconds)
        try:
            while True:
                job = await anyio.to_thread.run_sync(self.queue.get, job_id)
                if job is None:
                    raise NotFound(f"job '{job_id}' not found", code="job_not_found")
                left = (deadline - self.now()).total_seconds()
                if job.finished or left <= 0:
                    return job
                event.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(event.wait(), min(left, self.poll_seconds))
        finally:
            waiters = self._waiters.get(job_id, [])
            waiters.remove(waiter)
            if not waiters:
                self._waiters.pop(job_id, None)

    def outcome(self, job: Job) -> LifecycleEvent:
        """A validation job's end as the transition's: its event, or the error the
        validation raised (422 ``validation_failed`` with the report, 409, ...)."""
        if job.state is JobState.SUCCEEDED and job.output_digest is not None:
            return event_of(json.loads(self.blobs.get(job.output_digest)))
        if job.state is JobState.CANCELLED:
            raise Conflict(
                f"the validation job '{job.id}' was cancelled",
                code="validation_cancelled",
                job=job.id,
            )
        owner, name, version = split_ref(job.target)
        code = job.error_code or "validation_failed"
        message = job.error_message or f"the validation job '{job.id}' failed"
        extra: dict[str, Any] = {"job": job.id}
        if code == "validation_failed":
            with contextlib.suppress(NotFound):
                extra["report"] = self.registry.validation(owner, name, version).report
            raise Unprocessable(message, code=code, **extra)
        if code == "illegal_transition":
            raise Conflict(message, code=code, **extra)
        if code in ("version_not_found", "model_not_found"):
            raise NotFound(message, code=code, **extra)
        raise Internal(message, code=code, **extra)
