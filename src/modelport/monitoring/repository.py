"""Monitor policies, and the prediction log's rows a report reads."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import and_, delete, func, or_, select

from modelport.monitoring.types import MonitorPolicy
from modelport.store import Database
from modelport.store.base import utcnow
from modelport.store.tables import EndpointMonitorRow, PredictionOutcomeRow, PredictionRow

MAX_ROWS = 50_000
"""The most recent answered predictions a window reads: a report's cost stays bounded
on a busy endpoint (the sample is the window's latest)."""


@dataclass(frozen=True)
class LoggedAnswer:
    """One answered prediction of the window, with its outcome if one was joined."""

    model: str
    version: str
    arm: str | None
    tenant: str | None
    key_id: str | None
    inputs: list[dict[str, Any]] | None
    outputs: list[dict[str, Any]] | None
    answer_label: str | None
    answer_value: float | None
    outcome_label: str | None
    outcome_value: float | None


class MonitorRepository:
    def __init__(self, database: Database) -> None:
        self._db = database

    def policy(self, endpoint: str) -> MonitorPolicy | None:
        with self._db.transaction() as session:
            row = session.get(EndpointMonitorRow, endpoint)
            return None if row is None else MonitorPolicy.model_validate(row.policy)

    def policies(self) -> dict[str, MonitorPolicy]:
        with self._db.transaction() as session:
            rows = session.scalars(select(EndpointMonitorRow).order_by(EndpointMonitorRow.endpoint))
            return {row.endpoint: MonitorPolicy.model_validate(row.policy) for row in rows}

    def set_policy(self, endpoint: str, policy: MonitorPolicy, *, actor: str) -> None:
        with self._db.transaction() as session:
            row = session.get(EndpointMonitorRow, endpoint)
            data = policy.model_dump(mode="json")
            if row is None:
                session.add(EndpointMonitorRow(endpoint=endpoint, policy=data, updated_by=actor))
            else:
                row.policy, row.updated_at, row.updated_by = data, utcnow(), actor

    def delete_policy(self, endpoint: str) -> bool:
        with self._db.transaction() as session:
            deleted = session.execute(
                delete(EndpointMonitorRow).where(EndpointMonitorRow.endpoint == endpoint)
            )
            return bool(getattr(deleted, "rowcount", 0))

    def answers(self, endpoint: str, since: datetime, until: datetime) -> list[LoggedAnswer]:
        """The endpoint's answered predictions received in ``[since, until)``, newest
        ``MAX_ROWS`` at most, each with its outcome (a shadow copy's is the outcome of
        the prediction it copied)."""
        joined = func.coalesce(PredictionRow.shadow_of, PredictionRow.id)
        query = (
            select(PredictionRow, PredictionOutcomeRow.label, PredictionOutcomeRow.value)
            .outerjoin(PredictionOutcomeRow, PredictionOutcomeRow.prediction_id == joined)
            .where(
                and_(
                    PredictionRow.endpoint == endpoint,
                    PredictionRow.status == "ok",
                    PredictionRow.received_at >= since,
                    PredictionRow.received_at < until,
                    PredictionRow.model.is_not(None),
                    or_(PredictionRow.fallback.is_(None), PredictionRow.fallback == "version"),
                )
            )
            .order_by(PredictionRow.received_at.desc())
            .limit(MAX_ROWS)
        )
        with self._db.transaction() as session:
            return [
                LoggedAnswer(
                    model=row.model or "",
                    version=row.version or "",
                    arm="shadow" if row.shadow_of else row.arm,
                    tenant=row.tenant,
                    key_id=row.key_id,
                    inputs=row.inputs,
                    outputs=row.outputs,
                    answer_label=row.answer_label,
                    answer_value=row.answer_value,
                    outcome_label=label,
                    outcome_value=value,
                )
                for row, label, value in session.execute(query)
            ]
