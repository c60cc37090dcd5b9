"""Queries of the ``jobs`` and ``job_stages`` tables; every function takes the caller's
session and returns frozen records.

Claiming: a runner takes the oldest claimable jobs (queued, or running with an expired
lease) and writes its lease on them with a conditional UPDATE that names the lease it
saw, so two runners never both win a job. On PostgreSQL the candidates are read ``FOR
UPDATE SKIP LOCKED`` (concurrent claimers skip each other's rows instead of waiting);
on SQLite the write transaction (``BEGIN IMMEDIATE``) serialises claimers and the
conditional UPDATE alone decides.

Fencing: every claim increments the job's ``lease_generation``, and the ``Lease`` it
answers carries the new value. Every later write for the job (an attempt, an error, a
stage done, the end, a renewal, a release) first locks the job's row where its owner
and generation are still the lease's, so a runner whose lease was taken over (even by
itself, claiming again after a stall) writes nothing.

A tenant's job limits (its ``limits`` row, tenant scope): ``jobs``, the quota, bounds
its jobs queued and running, counted at submission; ``job_concurrency`` bounds its jobs
running, at claim: a tenant at its cap has its queued jobs left queued (a running job
whose lease expired is taken over all the same: it counts already). Both count under
a lock of the tenant's ``limits`` row (``FOR UPDATE`` on PostgreSQL; SQLite's write
transaction serialises), so two submissions or two claimers cannot both pass the last
place.

Jobs of a kind in ``UNLIMITED_KINDS`` (validations, ``jobs.validation``) are the
platform's own work on a tenant's behalf: neither limit counts or holds them (their
queue has its own bound, and their runners cap them).

A kind capped across the installation (``claim``'s ``running_cap``: validations) is
claimed only while fewer than the cap of it run on every runner together, counting the
jobs whose lease is live (one that expired frees its place, and is itself claimable
again). The count and the claim are one decision: on PostgreSQL under an advisory
transaction lock that every capped claim takes (two claimers never both see room for
the last place); on SQLite the write transaction serialises claimers already.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, func, or_, select, text, update
from sqlalchemy.orm import Session, aliased

from modelport.jobs.types import (
    TERMINAL,
    Job,
    JobState,
    Lease,
    NewJob,
    StageRun,
    StageSpec,
    StageState,
)
from modelport.store.database import affected_rows
from modelport.store.tables import JobRow, JobStageRow, LimitRow, TenantRow

_ACTIVE = (JobState.QUEUED.value, JobState.RUNNING.value)
VALIDATION = "validation"
"""The target kind of a version's validation job (``jobs.validation``)."""
UNLIMITED_KINDS = (VALIDATION,)


def add_job(session: Session, job: NewJob) -> None:
    session.add(
        JobRow(
            id=job.id,
            tenant=job.tenant,
            principal=job.principal,
            target_kind=job.target_kind,
            target=job.target,
            input_digest=job.input_digest,
            pipeline=[spec.to_doc() for spec in job.pipeline],
            webhook=job.webhook,
            idempotency_key=job.idempotency_key,
            fingerprint=job.fingerprint,
            trace_context=job.trace_context,
            state=JobState.QUEUED.value,
            stage=0,
            cancel_requested=False,
            created_at=job.created_at,
        )
    )
    for position, spec in enumerate(job.pipeline):
        session.add(
            JobStageRow(
                job_id=job.id,
                position=position,
                name=spec.name,
                implementation=spec.implementation,
                state=StageState.PENDING.value,
                attempts=0,
                closed_attempts=0,
            )
        )
    session.flush()


def job_quota(session: Session, tenant: str) -> tuple[int, int] | None:
    """The tenant's job quota and its jobs queued and running now, counted under a lock
    of its ``limits`` row (held to the end of the caller's transaction); None when it
    has no quota."""
    quota = session.scalar(
        select(LimitRow.jobs)
        .where(LimitRow.scope_type == "tenant", LimitRow.scope_id == tenant)
        .with_for_update()
    )
    if quota is None:
        return None
    active = session.scalar(
        select(func.count())
        .select_from(JobRow)
        .where(
            JobRow.tenant == tenant,
            JobRow.state.in_(_ACTIVE),
            JobRow.target_kind.not_in(UNLIMITED_KINDS),
        )
    )
    return quota, int(active or 0)


def get_job(session: Session, job_id: str, *, with_stages: bool = True) -> Job | None:
    row = session.scalar(select(JobRow).where(JobRow.id == job_id))
    if row is None:
        return None
    return _job(row, _stages(session, job_id) if with_stages else ())


def by_idempotency_key(session: Session, tenant: str, key: str) -> Job | None:
    row = session.scalar(
        select(JobRow).where(JobRow.tenant == tenant, JobRow.idempotency_key == key)
    )
    return None if row is None else _job(row, _stages(session, row.id))


def list_jobs(
    session: Session,
    *,
    tenant: str | None,
    state: JobState | None,
    target: str | None,
    before_seq: int | None,
    limit: int,
    kind: str | None = None,
) -> tuple[list[Job], int | None]:
    """Jobs newest first (``seq`` below ``before_seq``), at most ``limit``; and the
    ``seq`` to continue below when there are more."""
    query = select(JobRow)
    if tenant is not None:
        query = query.where(JobRow.tenant == tenant)
    if state is not None:
        query = query.where(JobRow.state == state.value)
    if target is not None:
        query = query.where(JobRow.target == target)
    if kind is not None:
        query = query.where(JobRow.target_kind == kind)
    if before_seq is not None:
        query = query.where(JobRow.seq < before_seq)
    rows = list(session.scalars(query.order_by(JobRow.seq.desc()).limit(limit + 1)))
    more = len(rows) > limit
    rows = rows[:limit]
    jobs = [_job(row, _stages(session, row.id)) for row in rows]
    return jobs, (rows[-1].seq if more and rows else None)


def claim(
    session: Session,
    owner: str,
    now: datetime,
    lease_seconds: float,
    limit: int,
    *,
    kinds: Collection[str] | None = None,
    exclude: Collection[str] = (),
    running_cap: int | None = None,
) -> list[Lease]:
    """Take up to ``limit`` claimable jobs under ``owner``'s lease, each claim bumping the
    job's ``lease_generation`` (the new lease's fencing token). ``kinds``: only jobs of
    those target kinds; ``exclude``: none of those (a runner's separately capped
    kinds); ``running_cap``: with ``kinds``, take only as many as leave at most that many
    of them running with a live lease, installation-wide (see the module docstring)."""
    if running_cap is not None:
        if kinds is None:
            raise ValueError("a running cap needs the kinds it caps")
        capped_turn(session)
        limit = min(limit, running_cap - live_count(session, kinds, now))
    if limit <= 0:
        return []
    claimable = or_(
        JobRow.state == JobState.QUEUED.value,
        and_(JobRow.state == JobState.RUNNING.value, JobRow.lease_expires_at < now),
    )
    of_kind = [] if kinds is None else [JobRow.target_kind.in_(list(kinds))]
    if exclude:
        of_kind.append(JobRow.target_kind.not_in(list(exclude)))
    candidates = session.execute(
        select(
            JobRow.id,
            JobRow.tenant,
            JobRow.state,
            JobRow.lease_owner,
            JobRow.lease_expires_at,
            JobRow.lease_generation,
            JobRow.target_kind,
        )
        .where(
            claimable,
            *of_kind,
            or_(
                JobRow.state == JobState.RUNNING.value,
                JobRow.target_kind.in_(UNLIMITED_KINDS),
                JobRow.tenant.not_in(_capped()),
            ),
            # A suspended tenant's jobs wait, queued or between leases, until it is lifted.
            JobRow.tenant.not_in(select(TenantRow.slug).where(TenantRow.suspended_at.is_not(None))),
        )
        .order_by(JobRow.seq)
        .limit(limit)
        .with_for_update(skip_locked=True, of=JobRow)  # PostgreSQL; nothing on SQLite
    ).all()
    limited = [row for row in candidates if row[-1] not in UNLIMITED_KINDS]
    room = _running_room(
        session, {tenant for _, tenant, state, *_ in limited if state == JobState.QUEUED.value}
    )
    expires = now + timedelta(seconds=lease_seconds)
    won: list[Lease] = []
    for job_id, tenant, state, seen_owner, seen_expiry, generation, kind in candidates:
        if state == JobState.QUEUED.value and kind not in UNLIMITED_KINDS and tenant in room:
            if room[tenant] <= 0:
                continue  # at its running cap: left queued
            room[tenant] -= 1
        # The lease as it was read: another claimer that got there first changed it.
        same_lease = (
            JobRow.lease_owner.is_(None) if seen_owner is None else JobRow.lease_owner == seen_owner
        )
        same_expiry = (
            JobRow.lease_expires_at.is_(None)
            if seen_expiry is None
            else JobRow.lease_expires_at == seen_expiry
        )
        result = session.execute(
            update(JobRow)
            .where(
                JobRow.id == job_id,
                claimable,
                same_lease,
                same_expiry,
                JobRow.lease_generation == generation,
            )
            .values(
                state=JobState.RUNNING.value,
                lease_owner=owner,
                lease_expires_at=expires,
                lease_generation=generation + 1,
            )
        )
        if affected_rows(result):
            won.append(Lease(job_id, owner, generation + 1))
    # started_at: first claim only
    if won:
        session.execute(
            update(JobRow)
            .where(JobRow.id.in_([lease.job_id for lease in won]), JobRow.started_at.is_(None))
            .values(started_at=now)
        )
    return won


def _capped() -> Any:
    """The tenants with as many jobs running as their ``job_concurrency`` (a first cut
    of the candidates: ``_running_room`` decides under the lock)."""
    running = aliased(JobRow)
    count = (
        select(func.count())
        .select_from(running)
        .where(
            running.tenant == LimitRow.scope_id,
            running.state == JobState.RUNNING.value,
            running.target_kind.not_in(UNLIMITED_KINDS),
        )
        .scalar_subquery()
    )
    return select(LimitRow.scope_id).where(
        LimitRow.scope_type == "tenant",
        LimitRow.job_concurrency.is_not(None),
        LimitRow.job_concurrency <= count,
    )


def _running_room(session: Session, tenants: set[str]) -> dict[str, int]:
    """How many more jobs each of ``tenants`` with a ``job_concurrency`` may start,
    counted under a lock of their ``limits`` rows (taken in one order: claimers cannot
    deadlock), held to the end of the claim's transaction."""
    if not tenants:
        return {}
    rows = session.execute(
        select(LimitRow.scope_id, LimitRow.job_concurrency)
        .where(
            LimitRow.scope_type == "tenant",
            LimitRow.scope_id.in_(sorted(tenants)),
            LimitRow.job_concurrency.is_not(None),
        )
        .order_by(LimitRow.scope_id)
        .with_for_update()
    )
    caps = {tenant: cap or 0 for tenant, cap in rows}
    if not caps:
        return {}
    counts = session.execute(
        select(JobRow.tenant, func.count())
        .where(
            JobRow.tenant.in_(sorted(caps)),
            JobRow.state == JobState.RUNNING.value,
            JobRow.target_kind.not_in(UNLIMITED_KINDS),
        )
        .group_by(JobRow.tenant)
    )
    running = {tenant: int(count) for tenant, count in counts}
    return {tenant: cap - running.get(tenant, 0) for tenant, cap in caps.items()}


def renew(session: Session, lease: Lease, now: datetime, lease_seconds: float) -> tuple[bool, bool]:
    """Extend the lease: (still held, cancel requested)."""
    result = session.execute(
        update(JobRow)
        .where(_held(lease))
        .values(lease_expires_at=now + timedelta(seconds=lease_seconds))
    )
    if not affected_rows(result):
        return False, False
    cancel = session.scalar(select(JobRow.cancel_requested).where(JobRow.id == lease.job_id))
    return True, bool(cancel)


def _held(lease: Lease) -> Any:
    """The job's row while ``lease`` is its current one: the fence of every write."""
    return and_(
        JobRow.id == lease.job_id,
        JobRow.lease_owner == lease.owner,
        JobRow.lease_generation == lease.generation,
        JobRow.state == JobState.RUNNING.value,
    )


def holds(session: Session, lease: Lease) -> bool:
    """Whether ``lease`` is still the job's, the row locked to the end of the transaction
    (PostgreSQL; SQLite's write transaction serialises): a claim cannot slip between this
    check and the writes after it."""
    found = session.scalar(select(JobRow.id).where(_held(lease)).with_for_update())
    return found is not None


def stage_started(
    session: Session, lease: Lease, position: int, now: datetime
) -> tuple[int, int] | None:
    """Count an attempt of the stage: its number, and how many attempts before it were
    closed (``closed_attempts``); None if the lease is lost."""
    if not holds(session, lease):
        return None
    row = session.get(JobStageRow, (lease.job_id, position))
    assert row is not None
    row.attempts += 1
    row.state = StageState.RUNNING.value
    if row.started_at is None:
        row.started_at = now
    row.error_code = row.error_message = None
    session.flush()
    return row.attempts, row.closed_attempts


def stage_failed(session: Session, lease: Lease, position: int, code: str, message: str) -> bool:
    """Record an attempt's end by an error (the stage may be retried, or the runner
    stops); False if the lease is lost."""
    if not holds(session, lease):
        return False
    row = session.get(JobStageRow, (lease.job_id, position))
    assert row is not None
    row.error_code, row.error_message = code, message[:4000]
    row.closed_attempts += 1
    session.flush()
    return True


def stage_done(session: Session, lease: Lease, position: int, digest: str, now: datetime) -> bool:
    """Record the stage done with its output and move the job to the next stage, in one
    transaction; False (nothing written) if the lease is lost."""
    if not holds(session, lease):
        return False
    row = session.get(JobStageRow, (lease.job_id, position))
    assert row is not None
    row.state = StageState.DONE.value
    row.finished_at = now
    row.output_digest = digest
    row.error_code = row.error_message = None
    session.execute(update(JobRow).where(_held(lease)).values(stage=position + 1))
    return True


def finish(
    session: Session,
    job_id: str,
    lease: Lease | None,
    state: JobState,
    now: datetime,
    *,
    output_digest: str | None = None,
    error: tuple[str, str] | None = None,
    failed_stage: int | None = None,
) -> bool:
    """End the job (its lease released); ``lease`` None: only a queued job (a cancel
    before any runner took it). False if it was not the caller's to end."""
    if lease is None:
        condition = and_(JobRow.id == job_id, JobRow.state == JobState.QUEUED.value)
    else:
        condition = _held(lease)
    values: dict[str, Any] = {
        "state": state.value,
        "finished_at": now,
        "lease_owner": None,
        "lease_expires_at": None,
        "output_digest": output_digest,
    }
    if error is not None:
        values["error_code"], values["error_message"] = error[0], error[1][:4000]
    result = session.execute(update(JobRow).where(condition).values(values))
    if not affected_rows(result):
        return False
    if failed_stage is not None:
        session.execute(
            update(JobStageRow)
            .where(JobStageRow.job_id == job_id, JobStageRow.position == failed_stage)
            .values(state=StageState.FAILED.value, finished_at=now)
        )
    return True


def request_cancel(session: Session, job_id: str) -> JobState | None:
    """Mark the job to stop at its next stage boundary; its state (None: no such job)."""
    row = session.scalar(select(JobRow).where(JobRow.id == job_id).with_for_update())
    if row is None:
        return None
    state = JobState(row.state)
    if state not in TERMINAL:
        row.cancel_requested = True
    return state


def release(session: Session, lease: Lease) -> None:
    """Give the lease back (a runner stopping cleanly): another may claim it at once."""
    session.execute(
        update(JobRow)
        .where(_held(lease))
        .values(lease_owner=None, lease_expires_at=None, state=JobState.QUEUED.value)
    )


def _stages(session: Session, job_id: str) -> tuple[StageRun, ...]:
    rows = session.scalars(
        select(JobStageRow).where(JobStageRow.job_id == job_id).order_by(JobStageRow.position)
    )
    return tuple(
        StageRun(
            position=r.position,
            name=r.name,
            implementation=r.implementation,
            state=StageState(r.state),
            attempts=r.attempts,
            closed_attempts=r.closed_attempts,
            started_at=r.started_at,
            finished_at=r.finished_at,
            error_code=r.error_code,
            error_message=r.error_message,
            output_digest=r.output_digest,
        )
        for r in rows
    )


def _job(row: JobRow, stages: Sequence[StageRun]) -> Job:
    return Job(
        id=row.id,
        tenant=row.tenant,
        principal=dict(row.principal),
        target_kind=row.target_kind,
        target=row.target,
        input_digest=row.input_digest,
        pipeline=tuple(StageSpec.from_doc(doc) for doc in row.pipeline),
        webhook=row.webhook,
        idempotency_key=row.idempotency_key,
        fingerprint=row.fingerprint,
        state=JobState(row.state),
        stage=row.stage,
        cancel_requested=row.cancel_requested,
        created_at=row.created_at,
        started_at=row.started_at,
        finished_at=row.finished_at,
        error_code=row.error_code,
        error_message=row.error_message,
        output_digest=row.output_digest,
        lease_owner=row.lease_owner,
        lease_expires_at=row.lease_expires_at,
        lease_generation=row.lease_generation,
        stages=tuple(stages),
        trace_context=dict(row.trace_context) if row.trace_context else None,
        erased_at=row.erased_at,
    )


_VALIDATION_TURN = text("SELECT pg_advisory_xact_lock(7426028)")
_CAPPED_TURN = text("SELECT pg_advisory_xact_lock(7426029)")


def capped_turn(session: Session) -> None:
    """Serialise claims of installation-capped kinds to the end of the caller's
    transaction, so each counts what the others claimed (a PostgreSQL advisory lock;
    SQLite's write transaction serialises already)."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(_CAPPED_TURN)


def live_count(session: Session, kinds: Collection[str], now: datetime) -> int:
    """Jobs of ``kinds`` running under a lease that has not expired at ``now``, across
    the installation."""
    found = session.scalar(
        select(func.count())
        .select_from(JobRow)
        .where(
            JobRow.target_kind.in_(list(kinds)),
            JobRow.state == JobState.RUNNING.value,
            JobRow.lease_expires_at >= now,
        )
    )
    return int(found or 0)


def validation_turn(session: Session) -> None:
    """Serialise submissions of validations to the end of the caller's transaction, so
    the queue's bound and the one-job-per-version rule are checked and kept together (a
    PostgreSQL advisory lock; SQLite's write transaction serialises already)."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(_VALIDATION_TURN)


def active_job(session: Session, kind: str, target: str) -> Job | None:
    """The job of ``kind`` on ``target`` still queued or running, if any (the oldest)."""
    row = session.scalar(
        select(JobRow)
        .where(JobRow.target_kind == kind, JobRow.target == target, JobRow.state.in_(_ACTIVE))
        .order_by(JobRow.seq)
        .limit(1)
    )
    return None if row is None else _job(row, _stages(session, row.id))


def queued_count(session: Session, kind: str) -> int:
    """Jobs of ``kind`` waiting for a runner, across the installation."""
    found = session.scalar(
        select(func.count())
        .select_from(JobRow)
        .where(JobRow.target_kind == kind, JobRow.state == JobState.QUEUED.value)
    )
    return int(found or 0)
