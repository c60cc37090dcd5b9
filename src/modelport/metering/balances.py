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

from sqlalchemy import TextClause, bindparam, select, text, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from modelport.errors import InvalidInput, NotFound
from modelport.metering.types import Balance, BalanceScope
from modelport.store import Database
from modelport.store.base import UTCDateTime, utcnow
from modelport.store.database import affected_rows
from modelport.store.tables import BalanceRow

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


def lock_order(tenant: str, level: str) -> tuple[str, int, str]:
    """Where ``level`` (of ``tenant``) comes in the one lock order every transaction that
    writes several levels follows: by tenant, then key balance, tenant balance, budget
    (``candidate_levels``' order). A plain sort of level names is not it: it would
    take every key balance before any tenant's balance, across tenants."""
    rank = 0 if level.startswith("balance:key:") else 1 if level.startswith("balance:") else 2
    return tenant, rank, level


def _parse(level: str) -> tuple[str, str, str]:
    kind, _, rest = level.partition(":")
    if kind == BUDGET:
        return kind, "", rest
    scope, _, scope_id = rest.partition(":")
    return kind, scope, scope_id


def _sql(statement: str) -> TextClause:
    # Prebuilt text: the request path runs these on every priced call, and building
    # expression objects each time costs more than the statements themselves.
    return text(statement).bindparams(bindparam("now", type_=UTCDateTime()))


_EXISTING = text(
    "SELECT 'balance:' || scope_type || ':' || scope_id FROM balances "
    "WHERE tenant = :tenant AND ((scope_type = 'tenant' AND scope_id = :tenant) "
    "OR (scope_type = 'key' AND scope_id = :key)) "
    "UNION ALL SELECT 'budget:' || tenant FROM budgets WHERE tenant = :tenant"
)
_HOLD = {
    BALANCE: _sql(
        "UPDATE balances SET reserved_micros = reserved_micros + :amount, updated_at = :now "
        "WHERE scope_type = :scope AND scope_id = :id "
        "AND balance_micros - reserved_micros - :amount >= -overdraft_micros"
    ),
    BUDGET: text(
        "UPDATE budgets SET reserved_micros = reserved_micros + :amount WHERE tenant = :id "
        "AND (hard_cap_micros IS NULL OR (CASE WHEN period = :period THEN spent_micros ELSE 0 "
        "END) + reserved_micros + :amount <= hard_cap_micros)"
    ),
}
_UNHOLD = {
    BALANCE: _sql(
        "UPDATE balances SET reserved_micros = reserved_micros - :amount, updated_at = :now "
        "WHERE scope_type = :scope AND scope_id = :id"
    ),
    BUDGET: text(
        "UPDATE budgets SET reserved_micros = reserved_micros - :amount WHERE tenant = :id"
    ),
}
# A budget's spending this month: a charge of its month adds to it, one of a newer
# month starts it again; one of an older month (a process that read the time just
# before midnight and committed after another's charge of the new month) leaves the
# new month's spending and period as they are. ``period`` never goes back.
_SPENT = (
    "CASE WHEN period = :period THEN spent_micros + :amount "
    "WHEN period > :period THEN spent_micros ELSE :amount END"
)
_PERIOD = "CASE WHEN period > :period THEN period ELSE :period END"
_DEBIT = {
    BALANCE: _sql(
        "UPDATE balances SET balance_micros = balance_micros - :amount, updated_at = :now "
        "WHERE scope_type = :scope AND scope_id = :id"
    ),
    BUDGET: _sql(
        f"UPDATE budgets SET spent_micros = {_SPENT}, period = {_PERIOD}, updated_at = :now "
        "WHERE tenant = :id"
    ),
}

_SETTLE = {
    BALANCE: _sql(
        "UPDATE balances SET reserved_micros = reserved_micros - :held, "
        "balance_micros = balance_micros - :amount, updated_at = :now "
        "WHERE scope_type = :scope AND scope_id = :id"
    ),
    BUDGET: _sql(
        "UPDATE budgets SET reserved_micros = reserved_micros - :held, "
        f"spent_micros = {_SPENT}, period = {_PERIOD}, updated_at = :now WHERE tenant = :id"
    ),
}


def existing_levels(session: Session, tenant: str, key_id: str | None) -> list[str]:
    """The levels that exist now for a call of ``tenant`` with ``key_id``, in lock order."""
    present = set(
        session.connection().execute(_EXISTING, {"tenant": tenant, "key": key_id or ""}).scalars()
    )
    return [level for level in candidate_levels(tenant, key_id) if level in present]


def _run(
    session: Session,
    statements: dict[str, TextClause],
    level: str,
    amount: int,
    now: datetime,
    held: int = 0,
) -> int:
    kind, scope, scope_id = _parse(level)
    params = {"scope": scope, "id": scope_id, "amount": amount, "now": now, "held": held}
    if kind == BUDGET:
        params["period"] = period_of(now)
    # A statement takes the parameters it names and ignores the others.
    return session.connection().execute(statements[kind], params).rowcount


_ROOM = {
    BALANCE: "SELECT balance_micros - reserved_micros + overdraft_micros FROM balances "
    "WHERE scope_type = :scope AND scope_id = :id",
    BUDGET: "SELECT hard_cap_micros, period, spent_micros, reserved_micros FROM budgets "
    "WHERE tenant = :id",
}
_ROOM_SQL = {
    dialect: {kind: text(sql + suffix) for kind, sql in _ROOM.items()}
    for dialect, suffix in (("sqlite", ""), ("postgresql", " FOR UPDATE"))
}


def room(session: Session, level: str, now: datetime) -> int | None:
    """What ``level`` can still hold (a hold of ``amount`` fits when ``amount <= room``,
    as ``hold``'s condition says), None when it has no limit, 0 when it is gone. Locks
    the row until the transaction ends (``FOR UPDATE`` on PostgreSQL; a SQLite
    transaction holds the database's write lock from its start): call it in lock
    order."""
    connection = session.connection()
    statements = _ROOM_SQL.get(connection.dialect.name, _ROOM_SQL["postgresql"])
    kind, scope, scope_id = _parse(level)
    row = connection.execute(statements[kind], {"scope": scope, "id": scope_id}).first()
    if row is None:
        return 0
    if kind == BALANCE:
        return int(row[0])
    cap, period, spent, reserved = row
    if cap is None:
        return None
    return int(cap) - (int(spent) if period == period_of(now) else 0) - int(reserved)


def hold(session: Session, level: str, amount: int, now: datetime) -> bool:
    """Add ``amount`` to what the level holds if it still fits; False if it does not
    (or the level is gone)."""
    return _run(session, _HOLD, level, amount, now) == 1


def unhold(session: Session, level: str, amount: int, now: datetime) -> None:
    """Give back ``amount`` a level held."""
    _run(session, _UNHOLD, level, amount, now)


def debit(session: Session, level: str, amount: int, now: datetime) -> None:
    """Charge ``amount`` to a level: a balance goes down, a budget's spending this
    month goes up (starting the month's total when the stored one is older)."""
    if amount:
        _run(session, _DEBIT, level, amount, now)


def settle(session: Session, level: str, held: int, amount: int, now: datetime) -> None:
    """Give back what a level held for a call and charge it what the call cost, at once."""
    _run(session, _SETTLE, level, amount, now, held)


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
            if affected_rows(updated) == 0:
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
