"""The price book: what a unit of a model's version costs, from when.

A rule prices one unit of one model, for one version or (``version`` None) for
every version without a rule of its own for that unit: a version's own rule
wins over the model-wide one. Among the rules of the same kind, the one with
the latest ``effective_from`` not after the call applies. Rules are never
edited or deleted: a price change is a new rule from a later time, and past
charges keep the snapshot of the rule that applied to them.

A version with no rule for a unit uses it for free (no reservation is taken).

The book is read through a cache of ``cache_ttl_seconds``: a rule added in this
process counts at once, in other processes within that time; add a change at
least that far in the future to have every gateway switch at the same instant.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta

from sqlalchemy import or_, select

from modelport.errors import InvalidInput
from modelport.metering.types import (
    BPS,
    FREE,
    FailureRule,
    NewPriceRule,
    PriceRule,
    PriceSnapshot,
    Unit,
)
from modelport.store import Database
from modelport.store.base import utcnow
from modelport.store.tables import PriceRuleRow

CLOCK_SKEW = timedelta(seconds=1)
"""How far in the past a new rule's ``effective_from`` may lie (clock skew, not backdating)."""


def _rule(row: PriceRuleRow) -> PriceRule:
    return PriceRule(
        id=row.id,
        model=row.model,
        version=row.version,
        unit=Unit(row.unit),
        unit_price_micros=row.unit_price_micros,
        per_units=row.per_units,
        revenue_share_bps=row.revenue_share_bps,
        failure_rule=FailureRule(row.failure_rule),
        failure_bps=row.failure_bps,
        effective_from=row.effective_from,
        created_at=row.created_at,
        created_by=row.created_by,
    )


def select_rule(
    rules: tuple[PriceRule, ...], version: str, unit: Unit, at: datetime
) -> PriceRule | None:
    """The rule of ``rules`` that prices ``unit`` of ``version`` at ``at``, or None."""
    own: PriceRule | None = None
    shared: PriceRule | None = None
    for rule in rules:
        if rule.unit is not unit or rule.effective_from > at:
            continue
        if rule.version == version:
            if own is None or (rule.effective_from, rule.id) > (own.effective_from, own.id):
                own = rule
        elif rule.version is None and (
            shared is None or (rule.effective_from, rule.id) > (shared.effective_from, shared.id)
        ):
            shared = rule
    return own or shared


def rules_in_effect(rules: Iterable[PriceRule], version: str, at: datetime) -> list[PriceRule]:
    """The rule of ``rules`` that prices each unit of ``version`` at ``at`` (the one the
    meter would charge by), ordered by unit."""
    kept = tuple(rules)
    chosen = (select_rule(kept, version, unit, at) for unit in sorted({r.unit for r in kept}))
    return [rule for rule in chosen if rule is not None]


class PriceBook:
    """Adds and reads price rules; answers the price of a call for the request path."""

    def __init__(
        self,
        database: Database,
        *,
        default_revenue_share_bps: int,
        cache_ttl_seconds: float = 5.0,
        now: Callable[[], datetime] = utcnow,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._db = database
        self.default_revenue_share_bps = default_revenue_share_bps
        self._ttl = cache_ttl_seconds
        self._now = now
        self._clock = clock
        self._cache: dict[tuple[str, str], tuple[float, tuple[PriceRule, ...]]] = {}
        self._lock = threading.Lock()

    def add(self, new: NewPriceRule, *, actor: str) -> PriceRule:
        """Add a rule (InvalidInput names what is wrong with it)."""
        now = self._now()
        effective_from = new.effective_from or now
        if effective_from.tzinfo is None:
            raise InvalidInput("effective_from needs a time zone", code="invalid_price")
        if effective_from < now - CLOCK_SKEW:
            raise InvalidInput(
                "effective_from must not be in the past: past charges are never repriced",
                code="invalid_price",
            )
        share = (
            self.default_revenue_share_bps
            if new.revenue_share_bps is None
            else new.revenue_share_bps
        )
        _check(new, share)
        with self._db.transaction() as session:
            row = PriceRuleRow(
                model=new.model,
                version=new.version,
                unit=new.unit.value,
                unit_price_micros=new.unit_price_micros,
                per_units=new.per_units,
                revenue_share_bps=share,
                failure_rule=new.failure_rule.value,
                failure_bps=new.failure_bps if new.failure_rule is FailureRule.FRACTION else 0,
                effective_from=effective_from,
                created_at=now,
                created_by=actor,
            )
            session.add(row)
            session.flush()
            rule = _rule(row)
        self.invalidate(new.model)
        return rule

    def list(self, model: str, *, version: str | None = None) -> list[PriceRule]:
        """The model's rules (those that can apply to ``version``, when given), oldest first."""
        query = select(PriceRuleRow).where(PriceRuleRow.model == model)
        if version is not None:
            query = query.where(
                or_(PriceRuleRow.version == version, PriceRuleRow.version.is_(None))
            )
        with self._db.transaction() as session:
            rows = session.scalars(query.order_by(PriceRuleRow.effective_from, PriceRuleRow.id))
            return [_rule(r) for r in rows]

    def rules_for(self, model: str, version: str) -> tuple[PriceRule, ...]:
        """Every rule that can price ``version`` (cached)."""
        key = (model, version)
        with self._lock:
            cached = self._cache.get(key)
        if cached is not None and cached[0] > self._clock():
            return cached[1]
        rules = tuple(self.list(model, version=version))
        with self._lock:
            if len(self._cache) > 8192:  # many distinct versions: start over rather than grow
                self._cache.clear()
            self._cache[key] = (self._clock() + self._ttl, rules)
        return rules

    def is_cached(self, model: str, version: str) -> bool:
        """True when ``rules_for`` will not touch the database."""
        with self._lock:
            cached = self._cache.get((model, version))
        return cached is not None and cached[0] > self._clock()

    def cached(self, model: str, version: str, at: datetime) -> dict[Unit, PriceSnapshot] | None:
        """``prices(model, version, at)`` when the rules are cached, else None (no I/O)."""
        return self.prices(model, version, at) if self.is_cached(model, version) else None

    def price(self, model: str, version: str, unit: Unit, at: datetime) -> PriceSnapshot:
        """The snapshot of the rule pricing ``unit`` of the version at ``at``; FREE if none."""
        rule = select_rule(self.rules_for(model, version), version, unit, at)
        return FREE if rule is None else rule.snapshot

    def prices(self, model: str, version: str, at: datetime) -> dict[Unit, PriceSnapshot]:
        """Every unit the version has a price for at ``at``."""
        rules = self.rules_for(model, version)
        found = {}
        for unit in {r.unit for r in rules}:
            rule = select_rule(rules, version, unit, at)
            if rule is not None:
                found[unit] = rule.snapshot
        return found

    def invalidate(self, model: str | None = None) -> None:
        with self._lock:
            if model is None:
                self._cache.clear()
            else:
                for key in [k for k in self._cache if k[0] == model]:
                    del self._cache[key]


def _check(new: NewPriceRule, share: int) -> None:
    if new.unit_price_micros < 0:
        raise InvalidInput("unit_price_micros must not be negative", code="invalid_price")
    if new.per_units < 1:
        raise InvalidInput("per_units must be at least 1", code="invalid_price")
    if not 0 <= share <= BPS:
        raise InvalidInput("revenue_share_bps must be within 0..10000", code="invalid_price")
    if new.failure_rule is FailureRule.FRACTION and not 0 <= new.failure_bps <= BPS:
        raise InvalidInput("failure_bps must be within 0..10000", code="invalid_price")
    if new.model.count("/") != 1:
        raise InvalidInput("model must be 'owner/name'", code="invalid_price")
