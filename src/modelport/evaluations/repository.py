"""Evaluation queries: the caller's session in, frozen records out. Results are written
once (``record_result``, ``record_failure``: only while the evaluation is queued)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from modelport.evaluations.metrics import PRIMARY
from modelport.evaluations.types import (
    Evaluation,
    EvaluationKind,
    EvaluationState,
    ServedVersion,
)
from modelport.store.tables import EvaluationRow


def _record(row: EvaluationRow) -> Evaluation:
    return Evaluation(
        id=row.id,
        kind=EvaluationKind(row.kind),
        tenant=row.tenant,
        created_by=row.created_by,
        job_id=row.job_id,
        model_owner=row.model_owner,
        model_name=row.model_name,
        model_version=row.model_version,
        version_digest=row.version_digest,
        dataset_owner=row.dataset_owner,
        dataset_name=row.dataset_name,
        dataset_version=row.dataset_version,
        dataset_digest=row.dataset_digest,
        split=row.split,
        task=row.task,
        output=row.output,
        published=row.published,
        state=EvaluationState(row.state),
        metrics=row.metrics,
        rows=row.rows,
        latency_ms=row.latency_ms,
        error_code=row.error_code,
        error_message=row.error_message,
        created_at=row.created_at,
        finished_at=row.finished_at,
        endpoint=row.endpoint,
        served=tuple(ServedVersion(**doc) for doc in row.served or ()),
    )


def insert(session: Session, **fields: Any) -> Evaluation:
    row = EvaluationRow(**fields)
    session.add(row)
    session.flush()
    return _record(row)


def attach_job(session: Session, evaluation_id: str, job_id: str) -> None:
    session.execute(
        update(EvaluationRow)
        .where(EvaluationRow.id == evaluation_id, EvaluationRow.job_id.is_(None))
        .values(job_id=job_id)
    )


def get(session: Session, evaluation_id: str) -> Evaluation | None:
    row = session.get(EvaluationRow, evaluation_id)
    return None if row is None else _record(row)


def by_job(session: Session, job_id: str) -> Evaluation | None:
    row = session.scalar(select(EvaluationRow).where(EvaluationRow.job_id == job_id))
    return None if row is None else _record(row)


def record_result(
    session: Session,
    evaluation_id: str,
    *,
    metrics: dict[str, float],
    rows: int,
    latency_ms: float,
    at: datetime,
    served: tuple[ServedVersion, ...] = (),
) -> bool:
    """Write the scores once; False if they were written already (a stage run again).
    ``served``: an endpoint evaluation's versions; when one served every row, the
    evaluation names it. The task's leaderboard metric is kept as ``score`` where the
    result is one version's verified score (``Evaluation.version_score``)."""
    row = session.get(EvaluationRow, evaluation_id)
    if row is None:
        return False
    values: dict[str, Any] = {
        "state": EvaluationState.SUCCEEDED,
        "metrics": metrics,
        "rows": rows,
        "latency_ms": latency_ms,
        "finished_at": at,
    }
    if row.endpoint is not None:
        values["served"] = [s.to_doc() for s in served]
    counts = row.kind == EvaluationKind.VERIFIED and (
        row.endpoint is None or (len(served) == 1 and bool(served[0].model))
    )
    if row.endpoint is not None and counts:
        (one,) = served
        owner, _, name = one.model.partition("/")
        values.update(
            model_owner=owner, model_name=name, model_version=one.version, version_digest=one.digest
        )
    metric, higher = PRIMARY.get(row.task, ("", True))
    if counts and metric in metrics:
        values.update(score=float(metrics[metric]), higher_is_better=higher)
    done = session.execute(
        update(EvaluationRow)
        .where(EvaluationRow.id == evaluation_id, EvaluationRow.state == EvaluationState.QUEUED)
        .values(**values)
    )
    return bool(getattr(done, "rowcount", 0))


def record_failure(session: Session, job_id: str, *, code: str, message: str, at: datetime) -> None:
    session.execute(
        update(EvaluationRow)
        .where(EvaluationRow.job_id == job_id, EvaluationRow.state == EvaluationState.QUEUED)
        .values(
            state=EvaluationState.FAILED, error_code=code, error_message=message, finished_at=at
        )
    )


def of_model(session: Session, owner: str, name: str) -> list[Evaluation]:
    rows = session.scalars(
        select(EvaluationRow)
        .where(EvaluationRow.model_owner == owner, EvaluationRow.model_name == name)
        .order_by(EvaluationRow.created_at.desc(), EvaluationRow.id)
    )
    return [_record(r) for r in rows]


def board(
    session: Session, task: str, dataset_owner: str, dataset_name: str, split: str | None
) -> list[Evaluation]:
    """Every published evaluation with scores on the dataset for the task."""
    query = select(EvaluationRow).where(
        EvaluationRow.task == task,
        EvaluationRow.dataset_owner == dataset_owner,
        EvaluationRow.dataset_name == dataset_name,
        EvaluationRow.state == EvaluationState.SUCCEEDED,
        EvaluationRow.published.is_(True),
    )
    if split is not None:
        query = query.where(EvaluationRow.split == split)
    return [_record(r) for r in session.scalars(query.order_by(EvaluationRow.id))]


def verified(session: Session, task: str) -> list[Evaluation]:
    """Every published, succeeded, platform-run evaluation of ``task``."""
    query = select(EvaluationRow).where(
        EvaluationRow.task == task,
        EvaluationRow.kind == EvaluationKind.VERIFIED,
        EvaluationRow.state == EvaluationState.SUCCEEDED,
        EvaluationRow.published.is_(True),
    )
    return [_record(r) for r in session.scalars(query.order_by(EvaluationRow.id))]


def boards(session: Session) -> list[tuple[str, str, str]]:
    """(task, dataset owner, dataset name) of every board with a published score."""
    rows = session.execute(
        select(EvaluationRow.task, EvaluationRow.dataset_owner, EvaluationRow.dataset_name)
        .where(EvaluationRow.state == EvaluationState.SUCCEEDED, EvaluationRow.published.is_(True))
        .distinct()
        .order_by(EvaluationRow.task, EvaluationRow.dataset_owner, EvaluationRow.dataset_name)
    )
    return [(t, o, n) for t, o, n in rows]


def fail(session: Session, evaluation_id: str, *, code: str, message: str, at: datetime) -> None:
    """An evaluation whose job could not start."""
    session.execute(
        update(EvaluationRow)
        .where(EvaluationRow.id == evaluation_id, EvaluationRow.state == EvaluationState.QUEUED)
        .values(
            state=EvaluationState.FAILED, error_code=code, error_message=message, finished_at=at
        )
    )
