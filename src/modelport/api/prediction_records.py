"""Turn one answered (or failed) prediction into a prediction-log record, on the request path.

``log_prediction`` takes what the predict route knows, adds who called (tenant, key,
request id from ``request.state``) and queues the record: it never waits and never
raises on a full buffer (the log counts what it drops). Inputs and outputs go in
only as the endpoint's ``LogPolicy`` allows, and are turned into JSON later, by
the log's writer.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

import numpy as np
from starlette.requests import Request

from modelport.api.deps import get_services
from modelport.observability.predictions import answer_of, detail_fields
from modelport.observability.types import LogPolicy, PredictionRecord
from modelport.serving.types import Provenance, VersionRef


def log_prediction(
    request: Request,
    *,
    prediction_id: str,
    endpoint: str,
    owner: str,
    chosen: VersionRef,
    provenance: Provenance | None,
    inputs: Mapping[str, np.ndarray],
    outputs: Mapping[str, np.ndarray] | None,
    received_at: datetime,
    latency_seconds: float,
    stages: Mapping[str, float],
    status: str = "ok",
    arm: str | None = None,
    policy: LogPolicy | None = None,
) -> bool:
    """Queue the record of one prediction; False when the log's buffer was full.

    ``provenance`` is None when nothing answered (``status`` is then the error code);
    ``chosen`` is the version routing chose, recorded when nothing answered.
    """
    ran = provenance.version if provenance is not None else chosen
    labels = None
    if ran is not None:
        declared = (ran.manifest.postprocessing or {}).get("labels")
        labels = [str(x) for x in declared] if isinstance(declared, list) else None
    label, value = answer_of(outputs, labels) if outputs is not None else (None, None)
    state = request.state
    record = PredictionRecord(
        id=prediction_id,
        endpoint=endpoint,
        owner=owner,
        model=ran.model if ran is not None else None,
        version=ran.version if ran is not None else None,
        backend=provenance.backend if provenance is not None else None,
        received_at=received_at,
        latency_seconds=latency_seconds,
        stages=dict(stages),
        status=status,
        tenant=getattr(state, "tenant", None),
        key_id=getattr(state, "key_id", None),
        request_id=getattr(state, "request_id", "") or "",
        fallback=(
            provenance.fallback.value
            if provenance is not None and provenance.fallback is not None
            else None
        ),
        arm=arm,
        answer_label=label,
        answer_value=value,
        **detail_fields(policy or LogPolicy(), inputs, outputs),
    )
    return get_services(request).prediction_log.record(record)
