"""Shadow answers into the prediction log: one record per copy, marked as the shadow
of the prediction it copied (``shadow_of``), so outcomes can be compared per arm."""

from __future__ import annotations

import uuid
from collections.abc import Callable

from modelport.observability.predictions import answer_of, detail_fields
from modelport.observability.types import LogPolicy, PredictionRecord
from modelport.serving.routing.shadow import ShadowResult

SHADOW_ARM = "shadow"


def shadow_record(result: ShadowResult) -> PredictionRecord:
    served = result.served
    outputs = served.outputs if served is not None else None
    post = result.version.manifest.postprocessing
    labels = [str(x) for x in post.labels] if post and post.labels is not None else None
    label, value = answer_of(outputs, labels) if outputs is not None else (None, None)
    endpoint = result.endpoint
    return PredictionRecord(
        id=uuid.uuid4().hex,
        endpoint=endpoint.name,
        owner=endpoint.tenant,
        model=result.version.model,
        version=result.version.version,
        backend=served.provenance.backend if served is not None else None,
        received_at=result.received_at,
        latency_seconds=result.seconds,
        stages=dict(served.timings) if served is not None else {},
        status=result.status,
        shadow_of=result.prediction_id,
        arm=SHADOW_ARM,
        answer_label=label,
        answer_value=value,
        **detail_fields(endpoint.log_policy or LogPolicy(), result.inputs, outputs),
    )


def shadow_recorder(record: Callable[[PredictionRecord], bool]) -> Callable[[ShadowResult], bool]:
    """``record`` is ``PredictionLog.record`` (never waits)."""
    return lambda result: record(shadow_record(result))
