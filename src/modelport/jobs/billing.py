"""A job's upfront hold: its upper bound reserved once when it starts running.

The runner calls ``open`` before a job's first stage runs (and again when a runner
resumes it: the hold's id is derived from the job's, ``hold_id``, so a resumed job finds
the hold it took and never holds twice), and ``close`` when the job ends, however it
ends. The built-in ``infer`` stage's metered call carries the hold's id
(``Caller.hold_id``): its reservation is drawn from the hold (``Reservations.draw``)
and settled as any call's, priced by the failure-billing rule when the attempt failed.
``close`` gives back what the hold has left.

The bound: for each built-in ``infer`` stage of the pipeline, the dearest call of its
target within the stage's timeout (``InferenceService.upper_cost``) times the attempts
the stage may take. A tenant whose balance or budget cannot hold it is refused before
any stage runs: the job fails with ``budget_exceeded`` and nothing is charged.

Not bounded up front: a pipeline with no built-in ``infer`` stage (a batch over a file,
whose lines name their own models; custom stages), and counted units only a request
knows (tokens; rows beyond one per call): such calls reserve for themselves, as a call
outside a job does, and so does a call the hold does not cover (it expired, or its
price rose).
"""

from __future__ import annotations

import contextlib
import logging

import anyio.to_thread
from sqlalchemy.exc import IntegrityError

from modelport.errors import ModelportError, PaymentRequired
from modelport.inference.service import InferenceService
from modelport.jobs.stages import hold_id, parse_target
from modelport.jobs.types import Job
from modelport.tenancy.types import Principal

_log = logging.getLogger(__name__)

INFER = "infer"
"""The implementation whose calls the hold bounds."""
GRACE_SECONDS = 600.0
"""Added to the hold's life past the longest the job's stages may take: the queue's
waits between them (a lease expiring, a retry's backoff) are not foreseen."""


def ttl_seconds(job: Job) -> float:
    """How long the job's stages may run at most, retries and backoffs included."""
    total = GRACE_SECONDS
    for spec in job.pipeline:
        attempts = spec.retries + 1 if spec.retryable else 1
        total += spec.timeout_seconds * attempts
        total += sum(spec.backoff_seconds * 2**n for n in range(attempts - 1))
    return total


class JobBilling:
    """Takes and gives back jobs' holds (see the module docstring)."""

    def __init__(self, inference: InferenceService) -> None:
        self.inference = inference
        self.reservations = inference.meter.reservations

    async def bound(self, job: Job, principal: Principal) -> int:
        """The most the job's ``infer`` stages can be charged, every attempt included."""
        target = parse_target(job.target_kind, job.target)
        total = 0
        for spec in job.pipeline:
            if spec.implementation != INFER:
                continue
            attempts = spec.retries + 1 if spec.retryable else 1
            cost = await self.inference.upper_cost(principal, target, spec.timeout_seconds)
            total += cost * attempts
        return total

    async def open(self, job: Job, principal: Principal) -> None:
        """Hold the job's bound, once: raises ``PaymentRequired`` (402
        ``budget_exceeded``) when it does not fit, holding nothing. A target the
        principal may not call holds nothing: its stage fails with its own error."""
        if not any(spec.implementation == INFER for spec in job.pipeline):
            return  # nothing bounded up front (a batch over a file, custom stages)
        reservation_id = hold_id(job.id)
        found = await anyio.to_thread.run_sync(self.reservations.get, reservation_id)
        if found is not None:
            return  # taken by a runner before: held, or drawn, released or expired
        try:
            amount = await self.bound(job, principal)
        except PaymentRequired:
            raise
        except ModelportError as exc:
            _log.info("job %s: no hold (%s)", job.id, exc.code)
            return
        if amount <= 0:
            return

        def reserve() -> None:
            # IntegrityError: another runner took it meanwhile; it is held once.
            with contextlib.suppress(IntegrityError):
                self.reservations.reserve(
                    principal.tenant or principal.id,
                    principal.key_id,
                    amount,
                    ttl_seconds=ttl_seconds(job),
                    model=None,
                    reservation_id=reservation_id,
                )

        await anyio.to_thread.run_sync(reserve)

    async def close(self, job_id: str) -> None:
        """Give back what the job's hold has left (nothing when it holds nothing)."""
        await anyio.to_thread.run_sync(self.release, job_id)

    def release(self, job_id: str) -> None:
        """``close``, blocking: for a queued job cancelled (``JobService.cancel``), whose
        hold a runner took before it gave the job back."""
        found = self.reservations.get(hold_id(job_id))
        if found is not None:
            self.reservations.release(found)
