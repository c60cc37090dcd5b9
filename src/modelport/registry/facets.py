"""Catalog facets: the matching models counted by task, format, license and price band.

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
from sqlalchemy.orm import Session

from modelport.registry.types import FacetCount
from modelport.store.tables import ModelRow, PriceRuleRow

FACETS = ("task", "format", "license", "price")
PRICE_BANDS = ("free", "low", "medium", "high")
LOW_BELOW = 1_000
MEDIUM_BELOW = 10_000


class PriceBands:
    """Each priced model's band now: a derived table of the price book (one row per model
    with a model-wide price in force), joined to ``ModelRow`` by reference; a model
    without a row is free. Computed once per query rather than once per matching model."""

    def __init__(self, now: datetime) -> None:
        latest = (
            select(
                PriceRuleRow.model,
                PriceRuleRow.unit,
                func.max(PriceRuleRow.effective_from).label("effective_from"),
            )
            .where(PriceRuleRow.version.is_(None), PriceRuleRow.effective_from <= now)
            .group_by(PriceRuleRow.model, PriceRuleRow.unit)
            .subquery("latest")
        )
        band = case(
            (PriceRuleRow.unit_price_micros <= 0, 0),
            (PriceRuleRow.unit_price_micros < LOW_BELOW * PriceRuleRow.per_units, 1),
            (PriceRuleRow.unit_price_micros < MEDIUM_BELOW * PriceRuleRow.per_units, 2),
            else_=3,
        )
        self.table = (
            select(PriceRuleRow.model, func.max(band).label("band"))
            .join(
                latest,
                and_(
                    PriceRuleRow.model == latest.c.model,
                    PriceRuleRow.unit == latest.c.unit,
                    PriceRuleRow.effective_from == latest.c.effective_from,
                ),
            )
            .where(PriceRuleRow.version.is_(None))
            .group_by(PriceRuleRow.model)
            .subquery("bands")
        )

    def join(self, stmt: Select[Any]) -> Select[Any]:
        """``stmt`` (over ``ModelRow``) with the bands joined."""
        return stmt.outerjoin(
            self.table, self.table.c.model == ModelRow.owner + "/" + ModelRow.name
        )

    @property
    def band(self) -> ColumnElement[int]:
        """A joined model's band, as its index in ``PRICE_BANDS``."""
        return func.coalesce(self.table.c.band, 0)

    def only(self, name: str) -> ColumnElement[bool]:
        """Models in band ``name``, as a condition on ``ModelRow`` needing no join (a
        semi-join on the priced models, which planners hash; a join to the bands for a
        filter was a nested loop on PostgreSQL); an unknown band matches nothing."""
        if name not in PRICE_BANDS:
            return false()
        ref = ModelRow.owner + "/" + ModelRow.name
        band = PRICE_BANDS.index(name)
        if band == 0:
            return ref.not_in(select(self.table.c.model).where(self.table.c.band > 0))
        return ref.in_(select(self.table.c.model).where(self.table.c.band == band))


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
    bands = PriceBands(now)
    rows = (
        bands.join(matching)
        .with_only_columns(
            ModelRow.task.label("task"),
            ModelRow.license.label("license"),
            bands.band.label("band"),
            formats.label("formats"),
        )
        .subquery("matches")
    )
    combos = session.execute(
        select(rows.c.task, rows.c.license, rows.c.band, rows.c.formats, func.count()).group_by(
            rows.c.task, rows.c.license, rows.c.band, rows.c.formats
        )
    )
    counts: dict[str, Counter[str]] = {name: Counter() for name in FACETS}
    total = 0
    for task, license, band, fmts, n in combos:
        values = {
            "task": {task} - {""},
            "format": set((fmts or "").split()),
            "license": {license} - {""},
            "price": {PRICE_BANDS[int(band)]},
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
