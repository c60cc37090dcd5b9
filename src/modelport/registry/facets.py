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

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Select, case, false, func, select
from sqlalchemy.orm import Session, aliased

from modelport.registry.types import FacetCount
from modelport.store.tables import ModelRow, ModelVersionRow, PriceRuleRow

FACETS = ("task", "format", "license", "price")
PRICE_BANDS = ("free", "low", "medium", "high")
LOW_BELOW = 1_000
MEDIUM_BELOW = 10_000


def price_band(now: datetime) -> ColumnElement[int]:
    """A model's price band as its index in ``PRICE_BANDS``, for a query over
    ``ModelRow`` (a correlated subquery on the price book)."""
    rule = aliased(PriceRuleRow)
    later = aliased(PriceRuleRow)
    superseded = (
        select(later.id)
        .where(
            later.model == rule.model,
            later.unit == rule.unit,
            later.version.is_(None),
            later.effective_from <= now,
            later.effective_from > rule.effective_from,
        )
        .exists()
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
            rule.effective_from <= now,
            ~superseded,
        )
        .correlate(ModelRow)
        .scalar_subquery()
    )
    return func.coalesce(dearest, 0)


def band_filter(band: str, now: datetime) -> ColumnElement[bool]:
    """Models in ``band``; an unknown band matches nothing."""
    if band not in PRICE_BANDS:
        return false()
    return price_band(now) == PRICE_BANDS.index(band)


Matching = Callable[[str | None], Select[int]]
"""The ids of the models matching every filter but the named one (None: every filter)."""


def count_facets(
    session: Session, matching: Matching, now: datetime
) -> dict[str, tuple[FacetCount, ...]]:
    """Each facet's values among the matching models, most frequent first (empty task
    and license values are not counted: they are no value to filter by)."""
    task = select(ModelRow.task, func.count()).where(
        ModelRow.id.in_(matching("task")), ModelRow.task != ""
    )
    license = select(ModelRow.license, func.count()).where(
        ModelRow.id.in_(matching("license")), ModelRow.license != ""
    )
    fmt = select(ModelVersionRow.format, func.count(ModelVersionRow.model_id.distinct())).where(
        ModelVersionRow.model_id.in_(matching("format"))
    )
    band = price_band(now).label("band")
    price = select(band, func.count()).where(ModelRow.id.in_(matching("price")))
    out = {
        "task": _counts(session.execute(task.group_by(ModelRow.task))),
        "format": _counts(session.execute(fmt.group_by(ModelVersionRow.format))),
        "license": _counts(session.execute(license.group_by(ModelRow.license))),
        "price": _counts((PRICE_BANDS[b], n) for b, n in session.execute(price.group_by(band))),
    }
    return out


def _counts(rows: Iterable[Any]) -> tuple[FacetCount, ...]:
    found = [FacetCount(str(value), int(count)) for value, count in rows]
    return tuple(sorted(found, key=lambda f: (-f.count, f.value)))
