"""The placements of the pool in the database: which worker holds which replica, and
how its load stands. Gateways' placer adds and drops rows; a worker reads its own and
records each one's state."""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Sequence

from sqlalchemy import delete, select, update
from sqlalchemy.exc import IntegrityError

from modelport.serving.pool.types import PLACED, PlacedReplica
from modelport.store.base import utcnow
from modelport.store.database import Database
from modelport.store.tables import WorkerPlacementRow


def _record(row: WorkerPlacementRow) -> PlacedReplica:
    return PlacedReplica(
        ref=row.ref,
        manifest_digest=row.manifest_digest,
        worker_id=row.worker_id,
        state=row.state,
        memory_bytes=row.memory_bytes,
        cause=row.cause,
    )


class PlacementRepository:
    def __init__(self, database: Database) -> None:
        self.database = database

    def all(self) -> list[PlacedReplica]:
        with self.database.transaction() as session:
            rows = session.scalars(select(WorkerPlacementRow).order_by(WorkerPlacementRow.id))
            return [_record(r) for r in rows]

    def of_worker(self, worker_id: str) -> list[PlacedReplica]:
        with self.database.transaction() as session:
            rows = session.scalars(
                select(WorkerPlacementRow)
                .where(WorkerPlacementRow.worker_id == worker_id)
                .order_by(WorkerPlacementRow.id)
            )
            return [_record(r) for r in rows]

    def add(self, ref: str, manifest_digest: str, worker_id: str, memory_bytes: int) -> None:
        """Place ``ref`` on ``worker_id`` (nothing if another placer just did)."""
        # The unique (ref, worker) row exists already: what was wanted.
        with contextlib.suppress(IntegrityError):
            self._add(ref, manifest_digest, worker_id, memory_bytes)

    def _add(self, ref: str, manifest_digest: str, worker_id: str, memory_bytes: int) -> None:
        with self.database.transaction() as session:
            found = session.scalar(
                select(WorkerPlacementRow.id).where(
                    WorkerPlacementRow.ref == ref, WorkerPlacementRow.worker_id == worker_id
                )
            )
            if found is None:
                session.add(
                    WorkerPlacementRow(
                        ref=ref,
                        manifest_digest=manifest_digest,
                        worker_id=worker_id,
                        state=PLACED,
                        memory_bytes=memory_bytes,
                    )
                )

    def set_state(self, ref: str, worker_id: str, state: str, cause: str | None = None) -> None:
        with self.database.transaction() as session:
            session.execute(
                update(WorkerPlacementRow)
                .where(WorkerPlacementRow.ref == ref, WorkerPlacementRow.worker_id == worker_id)
                .values(state=state, cause=cause, updated_at=utcnow())
            )

    def drop_workers(self, worker_ids: Collection[str]) -> int:
        """Forget every placement on ``worker_ids`` (workers whose lease lapsed)."""
        if not worker_ids:
            return 0
        with self.database.transaction() as session:
            result = session.execute(
                delete(WorkerPlacementRow).where(WorkerPlacementRow.worker_id.in_(worker_ids))
            )
            return int(getattr(result, "rowcount", 0) or 0)

    def drop_refs(self, refs: Sequence[str]) -> None:
        """Forget every placement of ``refs`` (versions no deployment holds)."""
        if not refs:
            return
        with self.database.transaction() as session:
            session.execute(delete(WorkerPlacementRow).where(WorkerPlacementRow.ref.in_(refs)))

    def drop(self, ref: str, worker_id: str) -> None:
        """Forget one replica (the pool scaled ``ref`` down)."""
        with self.database.transaction() as session:
            session.execute(
                delete(WorkerPlacementRow).where(
                    WorkerPlacementRow.ref == ref, WorkerPlacementRow.worker_id == worker_id
                )
            )
