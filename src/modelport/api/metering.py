"""The metering hook of the inference surfaces: what the call is, for ``InferenceMeter``.

Use around the backend call, after validation (a request refused before it reaches
a backend is not metered)::

    meter = services.metering.meter
    async with meter.metered(call_info(request, model, version, digest, timeout)) as call:
        result = await backend(...)
        record_inference(call, result.timings, inputs)

(or ``meter.open`` / ``succeeded`` / ``failed`` where a block does not fit).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from starlette.requests import Request

from modelport.metering.meter import MeteredCall
from modelport.metering.types import CallInfo
from modelport.runtime.types import InferenceTimings


def call_info(
    request: Request,
    model: str,
    version: str,
    manifest_digest: str,
    timeout_seconds: float,
    *,
    endpoint: str | None = None,
) -> CallInfo:
    """What the meter needs to know of this call (``InferenceMeter.open``)."""
    state = request.scope["state"]
    principal = state["principal"]
    return CallInfo(
        tenant=principal.tenant or principal.id,
        key_id=principal.key_id,
        model=model,
        version=version,
        manifest_digest=manifest_digest,
        endpoint=endpoint,
        request_id=state.get("request_id", ""),
        timeout_seconds=timeout_seconds,
    )


def record_inference(
    call: MeteredCall, timings: InferenceTimings, inputs: Mapping[str, np.ndarray]
) -> None:
    """Attribute to the call its rows' share of its batch's execution time."""
    first = next(iter(inputs.values()), None)
    rows = first.shape[0] if first is not None and first.ndim else 1
    share = min(1.0, rows / timings.batch_size) if timings.batch_size > 0 else 1.0
    call.record(compute_seconds=timings.execute_seconds * share)
