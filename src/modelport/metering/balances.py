"""Balances and the money levels a call is held and charged against.

A call of tenant T with API key K meets up to three levels, always taken in this
order (one lock order, so concurrent transactions cannot deadlock):

1. ``balance:key:<K>``     the key's spending allowance, when it has one;
2. ``balance:tenant:<T>``  the tenant's prepaid balance, when it has one;
3. ``budget:<T>``          the tenant's postpaid budget (``budgets``: hard cap per month).

Holding is one conditional UPDATE per level (``reserved += amount WHERE it still
fits``) inside the caller's transaction; the caller rolls the whole transaction
back when any level refuses. Nothing is read first and written later, so
concurrent holds can never overspend: a balance goes down to ``-overdraft_micros``
and no further, and a budget's spent plus held never passes its hard cap.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from sqlalchemy import case, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from modelport.errors import InvalidInput, NotFound
from modelport.metering.types import Balance, BalanceScope
from modelport.store import Database
from modelport.store.base import utcnow
from modelport.store.tables import BalanceRow, BudgetRow

BUDGET = "budget"
BALANCE = "balance"


def period_of(at: datetime) -> str:
    """The budget period (calendar month, UTC) of ``at``, as ``budgets`` keeps it."""
    return f"{at.year:04d}-{at.month:02d}"


def candidate_levels(tenant: str, key_id: str | None) -> list[str]:
    """Every level a call of ``tenant`` with ``key_id`` could meet, in lock order."""
    levels = [f"{BALANCE}:{BalanceScope.KEY.value}:{key_id}"] if key_id else []
    levels += [f"{BALANCE}:{BalanceScope.TENANT.value}:{tenant}", f"{BUDGET}:{tenant}"]
    return levels


def _parse(level: str) -> tuple[str, str, str]:
    kind, _, rest = level.partition(":")
    if kind == BUDGET:
        return kind, "", rest
    scope, _, scope_id = rest.partition(":")
    return kind, scope, scope_id


def existing_levels(session: Session, tenant: str, key_id: str | None) -> list[str]:
    """The levels that exist now for a call of ``tenant`` with ``key_id``, in lock order."""
    wanted = [(BalanceScope.TENANT.value, tenant)]
    if key_id:
        wanted.append((BalanceScope.KEY.value, key_id))
    found = set(
        session.execute(
            select(BalanceRow.scope_type, BalanceRow.scope_id).where(
                BalanceRow.tenant == tenant,
                BalanceRow.scope_id.in_([w[1] for w in wanted]),
            )
        )
    )
    has_budget = session.scalar(select(BudgetRow.tenant).where(BudgetRow.tenant == tenant))
    present = {f"{BALANCE}:{s}:{i}" for s, i in found if (s, i) in wanted}
    if has_budget is not None:
        present.add(f"{BUDGET}:{tenant}")
    return [level for level in candidate_levels(tenant, key_id) if level in present]


def hold(session: Session, level: str, amount: int, now: datetime) -> bool:
    """Add ``amount`` to what the level holds if it still fits; False if it does not
    (or the level is gone)."""
    kind, scope, scope_id = _parse(level)
    if kind == BUDGET:
        spent = case((BudgetRow.period == period_of(now), BudgetRow.spent_micros), else_=0)
        statement = (
            update(BudgetRow)
            .where(
                BudgetRow.tenant == scope_id,
                (BudgetRow.hard_cap_micros.is_(None))
                | (spent + BudgetRow.reserved_micros + amount <= BudgetRow.hard_cap_micros),
            )
            .values(reserved_micros=BudgetRow.reserved_micros + amount)
        )
    else:
        statement = (
            update(BalanceRow)
            .where(
                BalanceRow.scope_type == scope,
                BalanceRow.scope_id == scope_id,
                BalanceRow.balance_micros - BalanceRow.reserved_micros - amount
                >= -BalanceRow.overdraft_micros,
            )
            .values(reserved_micros=BalanceRow.reserved_micros + amount, updated_at=now)
        )
    return session.execute(statement).rowcount == 1  # type: ignore[attr-defined]


def unhold(session: Session, level: str, amount: int, now: datetime) -> None:
    """Give back ``amount`` a level held."""
    kind, scope, scope_id = _parse(level)
    if kind == BUDGET:
        session.execute(
            update(BudgetRow)
            .where(BudgetRow.tenant == scope_id)
            .values(reserved_micros=BudgetRow.reserved_micros - amount)
        )
    else:
        session.execute(
            update(BalanceRow)
            .where(BalanceRow.scope_type == scope, BalanceRow.scope_id == scope_id)
            .values(reserved_micros=BalanceRow.reserved_micros - amount, updated_at=now)
        )


def debit(session: Session, level: str, amount: int, now: datetime) -> None:
    """Charge ``amount`` to a level: a balance goes down, a budget's spending this
    month goes up (starting the month's total when the stored one is older)."""
    if amount == 0:
        return
    kind, scope, scope_id = _parse(level)
    if kind == BUDGET:
        period = period_of(now)
        session.execute(
            update(BudgetRow)
            .where(BudgetRow.tenant == scope_id)
            .values(
                spent_micros=case(
                    (BudgetRow.period == period, BudgetRow.spent_micros + amount), else_=amount
                ),
                period=period,
                updated_at=now,
            )
        )
    else:
        session.execute(
            update(BalanceRow)
            .where(BalanceRow.scope_type == scope, BalanceRow.scope_id == scope_id)
            .values(balance_micros=BalanceRow.balance_micros - amount, updated_at=now)
        )


def debit_all(
    session: Session, tenant: str, key_id: str | None, amount: int, now: datetime
) -> None:
    """Charge ``amount`` to every level of a call that held nothing (reported usage)."""
    if amount == 0:
        return
    for level in existing_levels(session, tenant, key_id):
        debit(session, level, amount, now)


def _balance(row: BalanceRow) -> Balance:
    return Balance(
        scope=BalanceScope(row.scope_type),
        scope_id=row.scope_id,
        tenant=row.tenant,
        balance_micros=row.balance_micros,
        reserved_micros=row.reserved_micros,
        overdraft_micros=row.overdraft_micros,
        updated_at=row.updated_at,
    )


def balance_not_found(scope: BalanceScope, scope_id: str) -> NotFound:
    return NotFound(f"{scope.value} {scope_id!r} has no balance", code="balance_not_found")


class BalanceRepository:
    """The ``balances`` table: prepaid balances of tenants, allowances of API keys.

    Billing credits them (payments, credit notes); the request path only holds and
    debits them, through the level functions above.
    """

    def __init__(self, database: Database, *, now: Callable[[], datetime] = utcnow) -> None:
        self._db = database
        self._now = now

    def get(self, scope: BalanceScope, scope_id: str) -> Balance:
        with self._db.transaction() as session:
            row = session.get(BalanceRow, (scope.value, scope_id))
            if row is None:
                raise balance_not_found(scope, scope_id)
            return _balance(row)

    def list(self, tenant: str) -> list[Balance]:
        """The tenant's balance and those of its keys."""
        query = (
            select(BalanceRow)
            .where(BalanceRow.tenant == tenant)
            .order_by(BalanceRow.scope_type.desc(), BalanceRow.scope_id)
        )
        with self._db.transaction() as session:
            return [_balance(r) for r in session.scalars(query)]

    def credit(
        self,
        scope: BalanceScope,
        scope_id: str,
        micros: int,
        *,
        tenant: str,
        overdraft_micros: int | None = None,
    ) -> Balance:
        """Add ``micros`` (negative: take away) to a balance, opening it at 0 when it does
        not exist; set its overdraft when given. Atomic: concurrent credits all count."""
        if overdraft_micros is not None and overdraft_micros < 0:
            raise InvalidInput("overdraft_micros must not be negative", code="invalid_balance")
        for attempt in range(2):
            try:
                return self._credit(scope, scope_id, micros, tenant, overdraft_micros)
            except IntegrityError:
                if attempt:  # a concurrent first credit opened it: add to it
                    raise
        raise AssertionError("unreachable")

    def _credit(
        self,
        scope: BalanceScope,
        scope_id: str,
        micros: int,
        tenant: str,
        overdraft: int | None,
    ) -> Balance:
        now = self._now()
        with self._db.transaction() as session:
            values: dict[str, object] = {
                "balance_micros": BalanceRow.balance_micros + micros,
                "updated_at": now,
            }
            if overdraft is not None:
                values["overdraft_micros"] = overdraft
            updated = session.execute(
                update(BalanceRow)
                .where(BalanceRow.scope_type == scope.value, BalanceRow.scope_id == scope_id)
                .values(**values)
            )
            if updated.rowcount == 0:  # type: ignore[attr-defined]
                session.add(
                    BalanceRow(
                        scope_type=scope.value,
                        scope_id=scope_id,
                        tenant=tenant,
                        balance_micros=micros,
                        reserved_micros=0,
                        overdraft_micros=overdraft or 0,
                        updated_at=now,
                    )
                )
                session.flush()
            row = session.get(BalanceRow, (scope.value, scope_id), populate_existing=True)
            assert row is not None
            return _balance(row)

    def delete(self, scope: BalanceScope, scope_id: str) -> None:
        """Close a balance (calls are then no longer held against it)."""
        with self._db.transaction() as session:
            row = session.get(BalanceRow, (scope.value, scope_id))
            if row is None:
                raise balance_not_found(scope, scope_id)
            session.delete(row)
