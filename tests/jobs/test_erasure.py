"""Erasing jobs' inputs and outputs (``jobs.erasure``): the tenant's retention erases
its finished jobs' payloads past its days and keeps their records and what billing
needs; bytes another job still lists stay; an erased job's output answers 410
``erased``; a crash between the record and the bytes leaves a queue the next sweep
finishes; the right-to-deletion call erases everything of the tenant's, audited."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import func, select, update

from modelport.blobs.interface import BlobStore
from modelport.blobs.local import LocalBlobStore
from modelport.jobs.erasure import JobErasure
from modelport.observability.retention import PredictionRetention
from modelport.store.tables import (
    BlobErasureRow,
    BlobRow,
    DatasetRow,
    DatasetVersionRow,
    JobRow,
)
from modelport.tenancy.types import AuditQuery
from tests.jobs.conftest import Jobs


def _done(jobs: Jobs) -> dict[str, Any]:
    submitted = jobs.submit()
    assert submitted.status_code == 202, submitted.text
    jobs.drain()
    done = jobs.get(submitted.json()["id"]).json()
    assert done["state"] == "succeeded", done
    return dict(done)


def _age(jobs: Jobs, job_id: str, days: int) -> None:
    """The job finished ``days`` ago (the erasure compares with its finish)."""
    with jobs.services.database.transaction() as session:
        session.execute(
            update(JobRow)
            .where(JobRow.id == job_id)
            .values(finished_at=jobs.services.clock.now() - timedelta(days=days))
        )


def _count(jobs: Jobs, table: Any) -> int:
    with jobs.services.database.transaction() as session:
        return int(session.scalar(select(func.count()).select_from(table)) or 0)


def _charged(jobs: Jobs) -> int:
    """The ledger's events, every one delivered first (the journal's, the outbox's)."""
    journal = jobs.services.metering.journal
    if journal is not None:
        assert journal.flush()
    return len(jobs.platform.entries())


def _local(jobs: Jobs) -> LocalBlobStore:
    store = jobs.services.blob_store
    assert isinstance(store, LocalBlobStore)
    return store


def _stored(jobs: Jobs, digest: str) -> bool:
    return jobs.services.blob_store.size(digest) is not None


def _retention(jobs: Jobs, store: BlobStore, audited: list[tuple[str, str]]) -> PredictionRetention:
    services = jobs.services
    return PredictionRetention(
        services.database,
        default_days=90,
        now=services.clock.now,
        also=[JobErasure(services.database, store, now=services.clock.now)],
        audit=lambda tenant, reason: audited.append((tenant, reason)),
    )


def test_the_sweep_erases_payloads_past_the_tenants_days_and_keeps_the_records(
    jobs: Jobs,
) -> None:
    old, new = _done(jobs), _done(jobs)
    # The same inputs: both jobs list the same input blob; each its own output.
    assert old["input_digest"] == new["input_digest"]
    assert old["output_digest"] != new["output_digest"]
    usage = _charged(jobs)
    assert usage >= 2
    _age(jobs, old["id"], 40)
    audited: list[tuple[str, str]] = []
    retention = _retention(jobs, jobs.services.blob_store, audited)
    retention.set_days("beta", 30, actor="test")
    retention.sweep()

    erased = jobs.get(old["id"]).json()
    assert erased["state"] == "succeeded" and erased["erased_at"] is not None
    assert erased["input_digest"] == "" and erased["output_digest"] is None
    assert "output" not in erased
    assert all(stage["output_digest"] is None for stage in erased["stages"])
    gone = jobs.platform.client.get(f"/api/jobs/{old['id']}/outputs/{old['output_digest']}")
    assert gone.status_code == 410 and gone.json()["code"] == "erased"
    assert audited == [("beta", "retention of 30 days erased 1 jobs")]
    # What billing needs stays: the calls' usage events, the job's id and state.
    assert _charged(jobs) == usage
    # The old output's bytes went; the input stays, the newer job still lists it.
    assert not _stored(jobs, old["output_digest"])
    assert _stored(jobs, new["input_digest"]) and _stored(jobs, new["output_digest"])
    assert jobs.get(new["id"]).json()["outputs"] == new["outputs"]
    kept = jobs.platform.client.get(f"/api/jobs/{new['id']}/outputs/{new['output_digest']}")
    assert kept.status_code == 200
    assert _count(jobs, BlobErasureRow) == 0

    retention.sweep()  # nothing more is past 30 days
    assert jobs.get(new["id"]).json()["erased_at"] is None


class CrashingStore(LocalBlobStore):
    """The same local store, but the process dies (an exception) at its first delete."""

    def delete(self, digest: str) -> None:
        raise SystemExit("killed")


def test_a_crash_before_the_bytes_went_is_finished_by_the_next_sweep(jobs: Jobs) -> None:
    done = _done(jobs)
    digests = {done["input_digest"], done["output_digest"]}
    _age(jobs, done["id"], 100)
    audited: list[tuple[str, str]] = []
    with pytest.raises(SystemExit):
        _retention(jobs, CrashingStore(_local(jobs).root), audited).sweep()
    # The record was erased in one transaction; the bytes are still there, queued.
    erased = jobs.get(done["id"]).json()
    assert erased["erased_at"] is not None and erased["output_digest"] is None
    assert all(_stored(jobs, digest) for digest in digests)
    assert _count(jobs, BlobErasureRow) >= 1

    _retention(jobs, jobs.services.blob_store, audited).sweep()
    assert not any(_stored(jobs, digest) for digest in digests)
    assert _count(jobs, BlobErasureRow) == 0
    with jobs.services.database.transaction() as session:
        assert not session.scalars(select(BlobRow.digest).where(BlobRow.digest.in_(digests))).all()


def test_the_right_to_deletion_erases_every_finished_job_of_the_tenant(jobs: Jobs) -> None:
    first, second = _done(jobs), _done(jobs)
    digests = {first["input_digest"], first["output_digest"]}
    client = jobs.platform.client
    answer = client.delete("/api/tenants/beta/data")
    assert answer.status_code == 200, answer.text
    assert answer.json() == {
        "tenant": "beta",
        "predictions": 0,
        "jobs": 2,
        "jobs_unfinished": 0,
    }
    for job in (first, second):
        assert jobs.get(job["id"]).json()["erased_at"] is not None
        fetched = client.get(f"/api/jobs/{job['id']}/outputs/{job['output_digest']}")
        assert fetched.status_code == 410 and fetched.json()["code"] == "erased"
    assert not any(_stored(jobs, digest) for digest in digests)  # nothing else lists them
    events = jobs.services.tenancy.audit_log(AuditQuery(tenant="beta", action=None)).items
    erasure = [e for e in events if e.target == "/api/tenants/beta/data"]
    assert [e.reason for e in erasure] == ["erased 2 jobs, 0 jobs_unfinished, 0 predictions"]
    assert client.delete("/api/tenants/beta/data").json()["jobs"] == 0  # idempotent


def test_a_job_finished_within_the_retention_is_kept(jobs: Jobs) -> None:
    done = _done(jobs)
    _age(jobs, done["id"], 89)
    erasure = JobErasure(
        jobs.services.database, jobs.services.blob_store, now=jobs.services.clock.now
    )
    assert erasure.sweep({}, 90) == {}
    _age(jobs, done["id"], 91)
    assert erasure.sweep({}, 90) == {"beta": 1}
    assert erasure.sweep({}, 90) == {}


def test_bytes_a_dataset_of_the_tenant_lists_as_a_split_stay(jobs: Jobs) -> None:
    """The same bytes as a job's input and as a split of the tenant's own dataset: the
    job's erasure leaves them to the dataset (its manifest is what lists them)."""
    done = _done(jobs)
    shared = done["input_digest"]
    with jobs.services.database.transaction() as session:
        dataset = DatasetRow(owner="beta", name="rows", visibility="private")
        session.add(dataset)
        session.flush()
        split = {"name": "test", "file": {"path": "test.parquet", "digest": shared}, "rows": 3}
        session.add(
            DatasetVersionRow(
                dataset_id=dataset.id,
                version="1",
                digest="sha256:" + "d" * 64,
                task="regression",
                license="MIT",
                manifest={"schema_version": 1, "splits": [split]},
            )
        )
    answer = jobs.platform.client.delete("/api/tenants/beta/data")
    assert answer.status_code == 200 and answer.json()["jobs"] == 1, answer.text
    assert jobs.get(done["id"]).json()["erased_at"] is not None
    assert _stored(jobs, shared)  # the dataset's split
    assert not _stored(jobs, done["output_digest"])  # nothing else lists the output


def test_a_digest_written_in_a_datasets_description_keeps_nothing(jobs: Jobs) -> None:
    """Only a split's file lists bytes: a tenant cannot keep another's bytes from erasure
    by writing their digest into text of its own."""
    done = _done(jobs)
    with jobs.services.database.transaction() as session:
        dataset = DatasetRow(owner="gamma", name="mention", visibility="private")
        session.add(dataset)
        session.flush()
        session.add(
            DatasetVersionRow(
                dataset_id=dataset.id,
                version="1",
                digest="sha256:" + "e" * 64,
                task="regression",
                license="MIT",
                manifest={"description": f"see {done['output_digest']}", "splits": []},
            )
        )
    assert jobs.platform.client.delete("/api/tenants/beta/data").json()["jobs"] == 1
    assert not _stored(jobs, done["output_digest"])
