"""Delayed outcomes of predictions, and accuracy per endpoint and version over them.

``attach`` records a prediction's true label or value once: the same outcome again
is a no-op (idempotent), a different one is a ``Conflict`` (``outcome_conflict``).
A prediction still in the log's buffer is written first, so an outcome may follow
its prediction at once.

``report`` joins outcomes to the endpoint's answered predictions (status ``ok``)
and, per model, version, experiment arm and shadow flag, gives: predictions,
outcomes joined, and for label outcomes ``accuracy`` (the outcome label equals the
answer's label: the class name or argmax index); for numeric outcomes ``mae``
(mean absolute error against the answer's value). A shadow copy is judged against
the outcome of the prediction it copied.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime

import anyio.to_thread
from sqlalchemy import and_, case, func, select
from sqlalchemy.exc import IntegrityError

from modelport.errors import Conflict, InvalidInput, NotFound
from modelport.observability.prediction_store import PredictionRepository
from modelport.observability.predictions import PredictionLog
from modelport.observability.types import StoredPrediction
from modelport.store import Database
from modelport.store.base import utcnow
from modelport.store.tables import PredictionOutcomeRow, PredictionRow


@dataclass(frozen=True)
class Outcome:
    prediction_id: str
    label: str | None
    value: float | None
    recorded_at: datetime
    recorded_by: str


@dataclass(frozen=True)
class VersionAccuracy:
    model: str | None
    version: str | None
    arm: str | None
    shadow: bool
    predictions: int
    outcomes: int
    labelled: int
    """Label outcomes whose prediction had a single label answer."""
    correct: int
    numeric: int
    """Numeric outcomes whose prediction had a single value answer."""
    accuracy: float | None
    mae: float | None


PREDICTION_ID_RE = re.compile(r"[A-Za-z0-9._:-]{1,64}")
"""What a prediction id may look like (anything else cannot be one: 404 without a lookup)."""


def prediction_not_found(prediction_id: str) -> NotFound:
    return NotFound(f"prediction {prediction_id} not found", code="prediction_not_found")


def _outcome(row: PredictionOutcomeRow) -> Outcome:
    return Outcome(row.prediction_id, row.label, row.value, row.recorded_at, row.recorded_by)


def normalize_label(label: str | int | bool) -> str:
    """Labels compare as text: ``True`` is ``"1"`` (a class index), ``2`` is ``"2"``."""
    if isinstance(label, bool):
        return "1" if label else "0"
    text = str(label)
    if not 0 < len(text) <= 256:
        raise InvalidInput("a label is 1-256 characters", code="invalid_outcome")
    return text


class OutcomeService:
    def __init__(
        self, database: Database, predictions: PredictionRepository, log: PredictionLog
    ) -> None:
        self._db = database
        self.predictions = predictions
        self.log = log

    async def find_prediction(self, prediction_id: str) -> StoredPrediction:
        """The logged prediction, writing it first if it still waits in this process's
        buffer. NotFound (``prediction_not_found``) when there is none."""
        if not PREDICTION_ID_RE.fullmatch(prediction_id):
            raise prediction_not_found(prediction_id[:64])
        found = await anyio.to_thread.run_sync(self.predictions.get, prediction_id)
        if found is None and self.log.pending(prediction_id) is not None:
            await self.log.flush()
            found = await anyio.to_thread.run_sync(self.predictions.get, prediction_id)
        if found is None:
            raise prediction_not_found(prediction_id)
        return found

    def attach(
        self,
        prediction_id: str,
        *,
        label: str | int | bool | None = None,
        value: float | None = None,
        actor: str,
    ) -> tuple[Outcome, bool]:
        """Record the outcome; returns it and whether it was new."""
        if (label is None) == (value is None):
            raise InvalidInput("give exactly one of 'label' and 'value'", code="invalid_outcome")
        text = normalize_label(label) if label is not None else None
        if value is not None and not math.isfinite(value):
            raise InvalidInput("'value' must be a finite number", code="invalid_outcome")
        try:
            with self._db.transaction() as session:
                row = PredictionOutcomeRow(
                    prediction_id=prediction_id,
                    label=text,
                    value=value,
                    recorded_at=utcnow(),
                    recorded_by=actor,
                )
                session.add(row)
                session.flush()
                return _outcome(row), True
        except IntegrityError:
            pass
        existing = self.get(prediction_id)
        if existing is None:  # pragma: no cover - the conflicting row vanished
            raise Conflict("outcome changed concurrently", code="outcome_conflict")
        if existing.label == text and existing.value == value:
            return existing, False
        raise Conflict(
            f"prediction {prediction_id} already has a different outcome",
            code="outcome_conflict",
            label=existing.label,
            value=existing.value,
        )

    def get(self, prediction_id: str) -> Outcome | None:
        with self._db.transaction() as session:
            row = session.get(PredictionOutcomeRow, prediction_id)
            return _outcome(row) if row is not None else None

    def report(
        self,
        endpoint: str,
        *,
        owner: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> list[VersionAccuracy]:
        """Accuracy per version of ``endpoint`` (only ``owner``'s predictions if given)."""
        p, o = PredictionRow, PredictionOutcomeRow
        shadow = case((p.shadow_of.is_(None), 0), else_=1)
        with_label = and_(o.label.is_not(None), p.answer_label.is_not(None))
        with_value = and_(o.value.is_not(None), p.answer_value.is_not(None))
        query = (
            select(
                p.model,
                p.version,
                p.arm,
                shadow,
                func.count(p.id),
                func.count(o.prediction_id),
                func.sum(case((with_label, 1), else_=0)),
                func.sum(case((and_(with_label, o.label == p.answer_label), 1), else_=0)),
                func.sum(case((with_value, 1), else_=0)),
                func.sum(case((with_value, func.abs(p.answer_value - o.value)), else_=0.0)),
            )
            .select_from(p)
            .outerjoin(o, o.prediction_id == func.coalesce(p.shadow_of, p.id))
            .where(p.endpoint == endpoint, p.status == "ok")
            .group_by(p.model, p.version, p.arm, shadow)
            .order_by(p.model, p.version, p.arm, shadow)
        )
        if owner is not None:
            query = query.where(p.owner == owner)
        if since is not None:
            query = query.where(p.received_at >= since)
        if until is not None:
            query = query.where(p.received_at < until)
        with self._db.transaction() as session:
            rows = session.execute(query).all()
        report = []
        for (
            model,
            version,
            arm,
            is_shadow,
            count,
            joined,
            labelled,
            correct,
            numeric,
            error,
        ) in rows:
            labelled, correct, numeric = int(labelled or 0), int(correct or 0), int(numeric or 0)
            report.append(
                VersionAccuracy(
                    model=model,
                    version=version,
                    arm=arm,
                    shadow=bool(is_shadow),
                    predictions=int(count),
                    outcomes=int(joined),
                    labelled=labelled,
                    correct=correct,
                    numeric=numeric,
                    accuracy=correct / labelled if labelled else None,
                    mae=float(error) / numeric if numeric else None,
                )
            )
        return report
