"""Queue a prediction-log record with who called taken from the request (tenant, key,
request id from ``request.state``): never waits, never raises on a full buffer (the
log counts what it drops). The inference service records its own calls; this is for
a surface that records one itself."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request

from modelport.api import deps
from modelport.inference.records import prediction_record


def log_prediction(request: Request, **fields: Any) -> bool:
    """Queue the record of one prediction (``prediction_record``'s fields but who
    called); False when the log's buffer was full."""
    state = request.state
    record = prediction_record(
        tenant=getattr(state, "tenant", None),
        key_id=getattr(state, "key_id", None),
        request_id=getattr(state, "request_id", "") or "",
        **fields,
    )
    return deps.prediction_log_service(request).record(record)
