"""Catalog facets: the matching models counted by task, format, license, price band and
score bucket (``registry.scores``).

Each facet is counted under every filter but its own (a page filtered to one task still
shows how many models each other task has), and always under the viewer's visibility,
so a count never includes a model the viewer may not read.

The price band is the model-wide price in force now (``price_rules`` rows without a
version, latest ``effective_from`` not in the future), taken per unit and the dearest
unit counted: ``free`` (no price, or zero), ``low`` (under 1,000 micro-units a unit,
$0.001), ``medium`` (under 10,000) and ``high``. A per-version price does not move a
model's band: a band describes the model as the catalog lists it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Select, and_, case, false, func, select
from sqlalchemy.orm import Session, aliased

from modelport.registry.scores import SCORE_BUCKETS, ScoreBuckets
from modelport.registry.types import FacetCount
from modelport.store.tables import ModelRow, PriceRuleRow

FACETS = ("task", "format", "license", "price", "score")
PRICE_BANDS = ("free", "low", "medium", "high")
LOW_BELOW = 1_000
MEDIUM_BELOW = 10_000


class PriceBands:
    """Each model's price band now, for queries over ``ModelRow``, computed the way each
    engine does best.

    - ``derived`` (PostgreSQL): every priced model's band once per query, a small table
      joined by hash (``join``), and filtered by a hashed semi-join (``only``).
    - otherwise (SQLite, which joins by nested loops): the band looked up per matching
      model on the price book's index (model, unit, effective_from); deriving the table
      cost a pass over the whole price book per query (15 ms at 10,000 rules).
    """

    def __init__(self, now: datetime, *, derived: bool) -> None:
        self.derived = derived
        rule = aliased(PriceRuleRow)
        later = aliased(PriceRuleRow)
        band = case(
            (rule.unit_price_micros <= 0, 0),
            (rule.unit_price_micros < LOW_BELOW * rule.per_units, 1),
            (rule.unit_price_micros < MEDIUM_BELOW * rule.per_units, 2),
            else_=3,
        )
        current = (later.version.is_(None), later.effective_from <= now)
        ref = ModelRow.owner + "/" + ModelRow.name
        self._ref = ref
        if derived:
            latest = (
                select(later.model, later.unit, func.max(later.effective_from).label("at"))
                .where(*current)
                .group_by(later.model, later.unit)
                .subquery("latest")
            )
            self.table = (
                select(rule.model, func.max(band).label("band"))
                .join(
                    latest,
                    and_(
                        rule.model == latest.c.model,
                        rule.unit == latest.c.unit,
                        rule.effective_from == latest.c.at,
                    ),
                )
                .where(rule.version.is_(None))
                .group_by(rule.model)
                .subquery("bands")
            )
            self.band: ColumnElement[int] = func.coalesce(self.table.c.band, 0)
            return
        at = (
            select(func.max(later.effective_from))
            .where(later.model == rule.model, later.unit == rule.unit, *current)
            .scalar_subquery()
        )
        dearest = (
            select(func.max(band))
            .where(rule.model == ref, rule.version.is_(None), rule.effective_from == at)
            .correlate(ModelRow)
            .scalar_subquery()
        )
        self.band = func.coalesce(dearest, 0)

    @classmethod
    def of(cls, session: Session, now: datetime) -> PriceBands:
        return cls(now, derived=session.get_bind().dialect.name == "postgresql")

    def join(self, stmt: Select[Any]) -> Select[Any]:
        """``stmt`` (over ``ModelRow``) ready to read ``band``."""
        if not self.derived:
            return stmt
        return stmt.outerjoin(self.table, self.table.c.model == self._ref)

    def only(self, name: str) -> ColumnElement[bool]:
        """Models in band ``name``, a condition needing no ``join``; an unknown band
        matches nothing."""
        if name not in PRICE_BANDS:
            return false()
        band = PRICE_BANDS.index(name)
        if not self.derived:
            return self.band == band
        if band == 0:
            return self._ref.not_in(select(self.table.c.model).where(self.table.c.band > 0))
        return self._ref.in_(select(self.table.c.model).where(self.table.c.band == band))


def count_facets(
    session: Session,
    matching: Select[int],
    formats: ColumnElement[str],
    wanted: Mapping[str, str],
    now: datetime,
) -> tuple[dict[str, tuple[FacetCount, ...]], int]:
    """Each facet's values among the models ``matching`` selects (the query and every
    filter that is no facet), under the facet filters ``wanted`` but the facet's own, most
    frequent first; and the count of models matching everything. ``formats`` is the
    search index's column of each model's formats, joined in ``matching``.

    One query: the matches grouped by their (task, license, price band, formats), a few
    hundred combinations at most, which are then counted per facet here. The search runs
    once, where a query per facet would run it once each. Empty task and license values
    are not counted: they are no value to filter by.
    """
    bands = PriceBands.of(session, now)
    scores = ScoreBuckets.of(session)
    rows = (
        scores.join(bands.join(matching))
        .with_only_columns(
            ModelRow.task.label("task"),
            ModelRow.license.label("license"),
            bands.band.label("band"),
            scores.bucket.label("score"),
            formats.label("formats"),
        )
        .subquery("matches")
    )
    grouped = (rows.c.task, rows.c.license, rows.c.band, rows.c.score, rows.c.formats)
    combos = session.execute(select(*grouped, func.count()).group_by(*grouped))
    counts: dict[str, Counter[str]] = {name: Counter() for name in FACETS}
    total = 0
    for task, license, band, score, fmts, n in combos:
        values = {
            "task": {task} - {""},
            "format": set((fmts or "").split()),
            "license": {license} - {""},
            "price": {PRICE_BANDS[int(band)]},
            "score": {SCORE_BUCKETS[int(score)]},
        }
        fits = {name: value in values[name] for name, value in wanted.items()}
        if all(fits.values()):
            total += n
        for name in FACETS:
            if all(ok for other, ok in fits.items() if other != name):
                counts[name].update(dict.fromkeys(values[name], n))
    return {name: _counts(counts[name].items()) for name in FACETS}, total


def _counts(rows: Iterable[tuple[str, int]]) -> tuple[FacetCount, ...]:
    found = [FacetCount(str(value), int(count)) for value, count in rows]
    return tuple(sorted(found, key=lambda f: (-f.count, f.value)))
