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

from sqlalchemy import ColumnElement, Select, case, false, func, select
from sqlalchemy.orm import Session, aliased

from modelport.registry.types import FacetCount
from modelport.store.tables import ModelRow, PriceRuleRow

FACETS = ("task", "format", "license", "price")
PRICE_BANDS = ("free", "low", "medium", "high")
LOW_BELOW = 1_000
MEDIUM_BELOW = 10_000


class PriceBands:
    """Each model's band now, looked up per model on the price book's index (model, unit,
    effective_from): a cost per matching model, where deriving every priced model's band
    first cost a pass over the whole price book per query (15 ms at 10,000 rules)."""

    def __init__(self, now: datetime) -> None:
        rule = aliased(PriceRuleRow)
        later = aliased(PriceRuleRow)
        latest = (
            select(func.max(later.effective_from))
            .where(
                later.model == rule.model,
                later.unit == rule.unit,
                later.version.is_(None),
                later.effective_from <= now,
            )
            .scalar_subquery()
        )
        band = case(
            (rule.unit_price_micros <= 0, 0),
            (rule.unit_price_micros < LOW_BELOW * rule.per_units, 1),
            (rule.unit_price_micros < MEDIUM_BELOW * rule.per_units, 2),
            else_=3,
        )
        dearest = (
            select(func.max(band))
            .where(
                rule.model == ModelRow.owner + "/" + ModelRow.name,
                rule.version.is_(None),
                rule.effective_from == latest,
            )
            .correlate(ModelRow)
            .scalar_subquery()
        )
        self.band: ColumnElement[int] = func.coalesce(dearest, 0)
        """A model's band (over ``ModelRow``), as its index in ``PRICE_BANDS``."""

    def only(self, name: str) -> ColumnElement[bool]:
        """Models in band ``name``; an unknown band matches nothing."""
        if name not in PRICE_BANDS:
            return false()
        return self.band == PRICE_BANDS.index(name)


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
    rows = matching.with_only_columns(
        ModelRow.task.label("task"),
        ModelRow.license.label("license"),
        PriceBands(now).band.label("band"),
        formats.label("formats"),
    ).subquery("matches")
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
