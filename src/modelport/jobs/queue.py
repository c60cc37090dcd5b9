"""The runner's side of the ``jobs`` table: claim under a lease, renew it, record stage
attempts and outcomes, finish. Every write but a claim is conditional on the caller
still holding the lease: a runner that lost it (it stalled past the expiry and another
took the job) writes nothing. Blocking: call from a thread."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from modelport.jobs import repository as repo
from modelport.jobs.types import Job, JobState
from modelport.store import Database


class JobQueue:
    def __init__(
        self, database: Database, *, now: Callable[[], datetime], lease_seconds: float
    ) -> None:
        self.database = database
        self.now = now
        self.lease_seconds = lease_seconds

    def claim(self, owner: str, limit: int) -> list[str]:
        with self.database.transaction() as session:
            return repo.claim(session, owner, self.now(), self.lease_seconds, limit)

    def get(self, job_id: str) -> Job | None:
        with self.database.transaction() as session:
            return repo.get_job(session, job_id)

    def renew(self, job_id: str, owner: str) -> tuple[bool, bool]:
        """(lease still held, cancel requested)."""
        with self.database.transaction() as session:
            return repo.renew(session, job_id, owner, self.now(), self.lease_seconds)

    def stage_started(self, job_id: str, position: int, owner: str) -> tuple[int, int] | None:
        with self.database.transaction() as session:
            return repo.stage_started(session, job_id, position, owner, self.now())

    def stage_failed(self, job_id: str, position: int, owner: str, code: str, message: str) -> bool:
        with self.database.transaction() as session:
            return repo.stage_failed(session, job_id, position, owner, code, message)

    def stage_done(self, job_id: str, position: int, owner: str, digest: str) -> bool:
        with self.database.transaction() as session:
            return repo.stage_done(session, job_id, position, owner, digest, self.now())

    def finish(
        self,
        job_id: str,
        owner: str | None,
        state: JobState,
        *,
        output_digest: str | None = None,
        error: tuple[str, str] | None = None,
        failed_stage: int | None = None,
    ) -> bool:
        with self.database.transaction() as session:
            return repo.finish(
                session,
                job_id,
                owner,
                state,
                self.now(),
                output_digest=output_digest,
                error=error,
                failed_stage=failed_stage,
            )

    def release(self, job_id: str, owner: str) -> None:
        with self.database.transaction() as session:
            repo.release(session, job_id, owner)
