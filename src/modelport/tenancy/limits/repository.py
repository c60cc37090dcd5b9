"""The ``limits`` table: rows in, frozen :class:`Limits` records out."""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import and_, delete, or_, select
from sqlalchemy.exc import IntegrityError

from modelport.store import Database
from modelport.store.base import utcnow
from modelport.store.database import affected_rows
from modelport.store.tables import LimitRow
from modelport.tenancy.limits.types import Limits, ScopeType

Scope = tuple[ScopeType, str]


def _record(row: LimitRow) -> Limits:
    return Limits(
        scope_type=ScopeType(row.scope_type),
        scope_id=row.scope_id,
        tenant=row.tenant,
        rpm=row.rpm,
        concurrency=row.concurrency,
        tpm=row.tpm,
        jobs=row.jobs,
        job_concurrency=row.job_concurrency,
        updated_at=row.updated_at,
        updated_by=row.updated_by,
    )


class LimitRepository:
    def __init__(self, database: Database) -> None:
        self._db = database

    def get(self, scope_type: ScopeType, scope_id: str) -> Limits | None:
        with self._db.transaction() as session:
            row = session.get(LimitRow, (scope_type.value, scope_id))
            return _record(row) if row else None

    def get_many(self, scopes: Iterable[Scope]) -> dict[Scope, Limits]:
        """The rows of the given scopes that exist, in one query."""
        wanted = list(scopes)
        if not wanted:
            return {}
        clause = or_(
            *(and_(LimitRow.scope_type == t.value, LimitRow.scope_id == i) for t, i in wanted)
        )
        with self._db.transaction() as session:
            rows = session.scalars(select(LimitRow).where(clause)).all()
            return {(ScopeType(r.scope_type), r.scope_id): _record(r) for r in rows}

    def list(
        self, *, tenant: str | None = None, scope_type: ScopeType | None = None
    ) -> list[Limits]:
        query = select(LimitRow).order_by(LimitRow.scope_type, LimitRow.scope_id)
        if tenant is not None:
            query = query.where(LimitRow.tenant == tenant)
        if scope_type is not None:
            query = query.where(LimitRow.scope_type == scope_type.value)
        with self._db.transaction() as session:
            return [_record(r) for r in session.scalars(query)]

    def put(
        self,
        scope_type: ScopeType,
        scope_id: str,
        *,
        tenant: str | None,
        rpm: int | None,
        concurrency: int | None,
        tpm: int | None,
        actor: str,
        jobs: int | None = None,
        job_concurrency: int | None = None,
    ) -> Limits:
        """Create or replace the scope's row."""
        for attempt in range(2):
            try:
                with self._db.transaction() as session:
                    row = session.get(LimitRow, (scope_type.value, scope_id))
                    if row is None:
                        row = LimitRow(scope_type=scope_type.value, scope_id=scope_id)
                        session.add(row)
                    row.tenant = tenant
                    row.rpm, row.concurrency, row.tpm = rpm, concurrency, tpm
                    row.jobs, row.job_concurrency = jobs, job_concurrency
                    row.updated_at, row.updated_by = utcnow(), actor
                    session.flush()
                    return _record(row)
            except IntegrityError:
                # Another writer created the row between our read and insert: update it.
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def delete(self, scope_type: ScopeType, scope_id: str) -> bool:
        with self._db.transaction() as session:
            result = session.execute(
                delete(LimitRow).where(
                    LimitRow.scope_type == scope_type.value, LimitRow.scope_id == scope_id
                )
            )
            return bool(affected_rows(result))
