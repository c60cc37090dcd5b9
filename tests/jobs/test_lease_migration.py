"""The lease-generation migration: a job made before it, running under a lease, reads
generation 0 after it, and the next claim takes generation 1 (fencing the old lease)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from modelport.jobs.queue import JobQueue
from modelport.jobs.types import Lease
from modelport.store import create_database
from modelport.store.base import utcnow
from tests.migrations import upgrade_across


def test_a_job_leased_before_the_migration_is_fenced_after_it(tmp_path: Path) -> None:
    found = upgrade_across(
        tmp_path,
        "0022_tenant_suspension",
        [
            "INSERT INTO jobs (id, tenant, principal, target_kind, target, input_digest,"
            " pipeline, fingerprint, state, stage, cancel_requested, created_at,"
            " lease_owner, lease_expires_at) VALUES ('j1', 'beta', '{}', 'model',"
            " 'acme/adder', 'sha256:0', '[]', 'sha256:0', 'running', 0, 0,"
            " '2026-01-01 00:00:00', 'old-runner', '2026-01-01 00:00:30')"
        ],
        "SELECT lease_generation FROM jobs WHERE id = 'j1'",
        tables=["jobs"],
    )
    assert found.diff == []
    assert found.rows == [(0,)]
    database = create_database(found.url)
    try:
        queue = JobQueue(database, now=lambda: utcnow() + timedelta(days=1), lease_seconds=30)
        old = Lease("j1", "old-runner", 0)
        assert queue.renew(old) == (True, False)  # the lease it had still holds
        [lease] = JobQueue(
            database, now=lambda: utcnow() + timedelta(days=2), lease_seconds=30
        ).claim("new-runner", 1)
        assert lease.generation == 1
        assert queue.renew(old) == (False, False)
    finally:
        database.dispose()
