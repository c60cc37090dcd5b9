"""The runner's side of the ``jobs`` table: claim under a lease, renew it, record stage
attempts and outcomes, finish. Every write but a claim carries the caller's ``Lease``
and is refused once another claim took the job (its generation moved on): a runner that
lost its lease writes nothing. Blocking: call from a thread."""

from __future__ import annotations

from collections.abc import Callable, Collection
from datetime import datetime

from sqlalchemy.orm import Session

from modelport.jobs import repository as repo
from modelport.jobs.types import Job, JobState, Lease
from modelport.store import Database

EndHook = Callable[[Session, Job], None]
"""Called with the ended job inside the transaction that ends it (its outbox rows
commit with the end, or neither does)."""


class JobQueue:
    def __init__(
        self, database: Database, *, now: Callable[[], datetime], lease_seconds: float
    ) -> None:
        self.database = database
        self.now = now
        self.lease_seconds = lease_seconds

    def claim(
        self,
        owner: str,
        limit: int,
        *,
        kinds: Collection[str] | None = None,
        exclude: Collection[str] = (),
        running_cap: int | None = None,
    ) -> list[Lease]:
        """Up to ``limit`` claimable jobs (of ``kinds`` only; none of ``exclude``; with
        ``running_cap``, only while fewer than it of ``kinds`` run installation-wide:
        ``repository.claim``)."""
        with self.database.transaction() as session:
            return repo.claim(
                session,
                owner,
                self.now(),
                self.lease_seconds,
                limit,
                kinds=kinds,
                exclude=exclude,
                running_cap=running_cap,
            )

    def get(self, job_id: str) -> Job | None:
        with self.database.transaction() as session:
            return repo.get_job(session, job_id)

    def renew(self, lease: Lease) -> tuple[bool, bool]:
        """(lease still held, cancel requested)."""
        with self.database.transaction() as session:
            return repo.renew(session, lease, self.now(), self.lease_seconds)

    def stage_started(self, lease: Lease, position: int) -> tuple[int, int] | None:
        with self.database.transaction() as session:
            return repo.stage_started(session, lease, position, self.now())

    def stage_failed(self, lease: Lease, position: int, code: str, message: str) -> bool:
        with self.database.transaction() as session:
            return repo.stage_failed(session, lease, position, code, message)

    def stage_done(self, lease: Lease, position: int, digest: str) -> bool:
        with self.database.transaction() as session:
            return repo.stage_done(session, lease, position, digest, self.now())

    def finish(
        self,
        job_id: str,
        lease: Lease | None,
        state: JobState,
        *,
        output_digest: str | None = None,
        error: tuple[str, str] | None = None,
        failed_stage: int | None = None,
        on_end: EndHook | None = None,
    ) -> Job | None:
        """End the job; the ended job, or None when it was not the caller's to end
        (nothing written, ``on_end`` not called)."""
        with self.database.transaction() as session:
            ended = repo.finish(
                session,
                job_id,
                lease,
                state,
                self.now(),
                output_digest=output_digest,
                error=error,
                failed_stage=failed_stage,
            )
            if not ended:
                return None
            job = repo.get_job(session, job_id)
            assert job is not None
            if on_end is not None:
                on_end(session, job)
            return job

    def release(self, lease: Lease) -> None:
        with self.database.transaction() as session:
            repo.release(session, lease)
