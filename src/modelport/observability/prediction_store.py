"""The ``predictions`` table: records in (idempotently, in batches), records out.

Inputs and outputs become Open Inference Protocol JSON tensors here, in the
writer's thread, never on the request path.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from sqlalchemy import insert, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from modelport.observability.types import Detail, PredictionRecord, StoredPrediction
from modelport.runtime.tensors import bytes_as_text, oip_datatype
from modelport.store import Database
from modelport.store.tables import PredictionRow


def tensors_json(arrays: Mapping[str, np.ndarray]) -> list[dict[str, Any]]:
    """Arrays as OIP JSON tensors (NaN and infinities as null; non-UTF-8 BYTES as null)."""
    tensors = []
    for name, value in arrays.items():
        array = np.asarray(value)
        datatype = oip_datatype(array)
        data: Any
        if datatype == "BYTES":
            data = bytes_as_text(array)
        else:
            data = array.reshape(-1).tolist()
            if array.dtype.kind == "f":
                data = [x if math.isfinite(x) else None for x in data]
        tensors.append(
            {"name": name, "datatype": datatype, "shape": list(array.shape), "data": data}
        )
    return tensors


def _payload_bytes(arrays: Mapping[str, np.ndarray]) -> int:
    total = 0
    for value in arrays.values():
        array = np.asarray(value)
        if array.dtype == np.object_:
            total += sum(len(x) if isinstance(x, bytes | str) else 8 for x in array.reshape(-1))
        else:
            total += int(array.nbytes)
    return total


def _row(record: PredictionRecord) -> dict[str, Any]:
    detail = record.detail
    inputs = outputs = None
    if detail is Detail.LOGGED:
        size = _payload_bytes(record.inputs or {}) + _payload_bytes(record.outputs or {})
        if size > record.max_detail_bytes:
            detail = Detail.TOO_LARGE
        else:
            inputs = tensors_json(record.inputs) if record.inputs is not None else None
            outputs = tensors_json(record.outputs) if record.outputs is not None else None
    return {
        "id": record.id,
        "endpoint": record.endpoint,
        "owner": record.owner,
        "model": record.model,
        "version": record.version,
        "backend": record.backend,
        "received_at": record.received_at,
        "latency_seconds": record.latency_seconds,
        "stages": dict(record.stages),
        "status": record.status,
        "tenant": record.tenant,
        "key_id": record.key_id,
        "request_id": record.request_id,
        "fallback": record.fallback,
        "shadow_of": record.shadow_of,
        "arm": record.arm,
        "answer_label": record.answer_label,
        "answer_value": record.answer_value,
        "inputs": inputs,
        "outputs": outputs,
        "detail": detail.value,
    }


def _stored(row: PredictionRow) -> StoredPrediction:
    return StoredPrediction(
        id=row.id,
        endpoint=row.endpoint,
        owner=row.owner,
        model=row.model,
        version=row.version,
        backend=row.backend,
        received_at=row.received_at,
        latency_seconds=row.latency_seconds,
        stages=dict(row.stages),
        status=row.status,
        tenant=row.tenant,
        key_id=row.key_id,
        request_id=row.request_id,
        fallback=row.fallback,
        shadow_of=row.shadow_of,
        arm=row.arm,
        answer_label=row.answer_label,
        answer_value=row.answer_value,
        inputs=row.inputs,
        outputs=row.outputs,
        detail=row.detail,
    )


class PredictionRepository:
    def __init__(self, database: Database) -> None:
        self._db = database

    def insert(self, records: Sequence[PredictionRecord]) -> int:
        """Write records; ones already written (same id: a retried batch) are skipped."""
        if not records:
            return 0
        rows = [_row(r) for r in records]
        dialect = self._db.dialect
        if dialect == "postgresql":
            statement: Any = pg_insert(PredictionRow).on_conflict_do_nothing()
        elif dialect == "sqlite":
            statement = sqlite_insert(PredictionRow).on_conflict_do_nothing()
        else:  # pragma: no cover - only SQLite and PostgreSQL are supported
            statement = insert(PredictionRow)
        with self._db.transaction() as session:
            session.execute(statement, rows)
        return len(rows)

    def get(self, prediction_id: str) -> StoredPrediction | None:
        with self._db.transaction() as session:
            row = session.get(PredictionRow, prediction_id)
            return _stored(row) if row is not None else None

    def list(self, *, endpoint: str, limit: int = 100) -> list[StoredPrediction]:
        """The endpoint's latest predictions, newest first."""
        query = (
            select(PredictionRow)
            .where(PredictionRow.endpoint == endpoint)
            .order_by(PredictionRow.received_at.desc(), PredictionRow.id)
            .limit(limit)
        )
        with self._db.transaction() as session:
            return [_stored(row) for row in session.scalars(query)]
