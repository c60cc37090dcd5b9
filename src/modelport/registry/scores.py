"""The catalog's score: each model's best verified leaderboard score, for the ``score``
facet and the ``min_score`` filter.

A model's score is read from its evaluations that count as a version's verified score
(``evaluations.score``, written with the result: run by the platform, succeeded,
published; for an endpoint, one version served every row), on the metric of the
evaluation's task board (accuracy, exact match, recall@1: higher is better; regression's
MAE: lower is better). Publishers' claims never count.

Buckets (``SCORE_BUCKETS``), by the best score on a higher-is-better metric: ``0.9-1``,
``0.7-0.9``, ``0.5-0.7``, ``0-0.5``; a model scored only on a lower-is-better metric,
which has no fixed scale, is ``lower-better``; one with no verified score ``unscored``.

``min_score`` keeps the models with a score that meets it in its metric's direction (at
least it where higher is better, at most it where lower is better), as routing's
``min_score`` does: pair it with ``task`` to compare like with like.

The facet reads each model's bucket as each engine does best (``ScoreBuckets``); the
filters test a semi-join on the scored evaluations, which are few beside the catalog.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, Select, and_, case, false, func, or_, select
from sqlalchemy.orm import Session

from modelport.store.tables import EvaluationRow, ModelRow

SCORE_BUCKETS = ("unscored", "0-0.5", "0.5-0.7", "0.7-0.9", "0.9-1", "lower-better")
_SUCCEEDED = "succeeded"


def _scored() -> list[ColumnElement[bool]]:
    return [
        EvaluationRow.score.is_not(None),
        EvaluationRow.published.is_(True),
        EvaluationRow.state == _SUCCEEDED,
    ]


class ScoreBuckets:
    """Each model's score bucket, for queries over ``ModelRow`` (module docstring),
    computed the way each engine does best, as ``facets.PriceBands`` does:

    - ``derived`` (PostgreSQL): the scored evaluations aggregated once per query, a small
      table joined by hash (``join``);
    - otherwise (SQLite, which joins by nested loops): the bucket looked up per matching
      model on the evaluations' (model owner, name) index.

    The filters (``only``) test a semi-join on the aggregate on both.
    """

    def __init__(self, *, derived: bool) -> None:
        self.derived = derived
        self.table = (
            select(
                EvaluationRow.model_owner.label("owner"),
                EvaluationRow.model_name.label("name"),
                _best(True).label("high"),
                _best(False).label("low"),
            )
            .where(*_scored())
            .group_by(EvaluationRow.model_owner, EvaluationRow.model_name)
            .subquery("scores")
        )
        self._table_bucket = _bucket(self.table.c.high, self.table.c.low)
        if derived:
            self.bucket: ColumnElement[int] = self._table_bucket
            return
        self.bucket = (
            select(_bucket(_best(True), _best(False)))
            .where(
                EvaluationRow.model_owner == ModelRow.owner,
                EvaluationRow.model_name == ModelRow.name,
                *_scored(),
            )
            .correlate(ModelRow)
            .scalar_subquery()
        )

    @classmethod
    def of(cls, session: Session) -> ScoreBuckets:
        return cls(derived=session.get_bind().dialect.name == "postgresql")

    def join(self, stmt: Select[Any]) -> Select[Any]:
        """``stmt`` (over ``ModelRow``) ready to read ``bucket``."""
        if not self.derived:
            return stmt
        return stmt.outerjoin(
            self.table,
            and_(self.table.c.owner == ModelRow.owner, self.table.c.name == ModelRow.name),
        )

    def only(self, name: str) -> ColumnElement[bool]:
        """Models in bucket ``name``, a condition needing no ``join``; an unknown bucket
        matches nothing."""
        if name not in SCORE_BUCKETS:
            return false()
        ref = ModelRow.owner + "/" + ModelRow.name
        scored = select(self.table.c.owner + "/" + self.table.c.name)
        if name == "unscored":
            return ref.not_in(scored)
        return ref.in_(scored.where(self._table_bucket == SCORE_BUCKETS.index(name)))


def _best(higher: bool) -> ColumnElement[Any]:
    """The best score on metrics better higher (``higher``) or lower."""
    score = case((EvaluationRow.higher_is_better.is_(higher), EvaluationRow.score))
    return func.max(score) if higher else func.min(score)


def _bucket(high: ColumnElement[Any], low: ColumnElement[Any]) -> ColumnElement[int]:
    """The index in ``SCORE_BUCKETS`` of a model with these best scores."""
    return case(
        (high >= 0.9, 4),
        (high >= 0.7, 3),
        (high >= 0.5, 2),
        (high.is_not(None), 1),
        (low.is_not(None), 5),
        else_=0,
    )


def meets(minimum: float) -> ColumnElement[bool]:
    """Models with a verified score that meets ``minimum`` (module docstring)."""
    ref = ModelRow.owner + "/" + ModelRow.name
    good = or_(
        and_(EvaluationRow.higher_is_better.is_(True), EvaluationRow.score >= minimum),
        and_(EvaluationRow.higher_is_better.is_(False), EvaluationRow.score <= minimum),
    )
    return ref.in_(
        select(EvaluationRow.model_owner + "/" + EvaluationRow.model_name).where(*_scored(), good)
    )
