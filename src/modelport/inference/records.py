"""One answered (or failed) prediction as a prediction-log record (no I/O).

Inputs and outputs go in only as the endpoint's ``LogPolicy`` allows, and are turned
into JSON later, by the log's writer.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

import numpy as np

from modelport.observability.predictions import answer_of, detail_fields
from modelport.observability.types import LogPolicy, PredictionRecord
from modelport.serving.types import Provenance, VersionRef


def prediction_record(
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
    tenant: str | None,
    key_id: str | None,
    request_id: str,
    status: str = "ok",
    arm: str | None = None,
    policy: LogPolicy | None = None,
) -> PredictionRecord:
    """The record of one prediction.

    ``provenance`` is None when nothing answered (``status`` is then the error code);
    ``chosen`` is the version routing chose, recorded when nothing answered.
    """
    ran = provenance.version if provenance is not None else chosen
    labels = None
    if ran is not None:
        post = ran.manifest.postprocessing
        labels = [str(x) for x in post.labels] if post and post.labels is not None else None
    label, value = answer_of(outputs, labels) if outputs is not None else (None, None)
    return PredictionRecord(
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
        tenant=tenant,
        key_id=key_id,
        request_id=request_id,
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
