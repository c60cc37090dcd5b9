"""Step 8, record: what the call used, on its metered call, and its prediction-log
record (an endpoint call's; a direct call's where sampled).

A unary call's usage (``Usage``): its rows answered (dimension 0 of the outputs declared
with a variable first dimension, never above the rows asked), its wall time since it was
dispatched, its rows' share of its batch's execution time, and, for a model that counts
its input tokens, the tokens its ``tokens`` output reports (that output removed unless
asked for). A fallback version that answered bills the call at its prices. A stream
counted what it delivered as it went; here the engine's time is recorded (submission to
last chunk) and, where no backend counted the prompt, its estimate.

``log_prediction`` is the one place an endpoint call's prediction-log record is made,
``_log_direct`` a direct version call's where a sampling policy keeps it
(``observability.sampling``; nothing is made or decided while no policy is set): neither
waits (a full log counts the drop).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from modelport.errors import ModelportError
from modelport.inference.call import Call, Mode
from modelport.inference.records import prediction_record
from modelport.inference.tokens import input_tokens
from modelport.inference.types import Usage
from modelport.manifest import TensorSpec
from modelport.metering.types import Unit
from modelport.observability.sampling import PredictionSampling
from modelport.observability.types import LogPolicy
from modelport.serving.routing.streams import PlannedStream, prompt_tensor, texts_tensor
from modelport.serving.types import GPU_SECONDS

if TYPE_CHECKING:
    from modelport.inference.pipeline import Env


async def record(env: Env, call: Call) -> None:
    metered = call.metered
    assert metered is not None
    if call.mode is Mode.STREAM:
        _record_stream(env, call)
        return
    request = call.request
    assert request is not None
    prediction = call.prediction
    if prediction is not None:
        ran = prediction.version
        chosen = call.ref
        if ran is not None and chosen is not None and ran.ref != chosen.ref:
            metered.ran_version(ran.model, ran.version, ran.manifest_digest)
        outputs, timings, batch = prediction.outputs, prediction.timings, prediction.batch_size
        assert call.route is not None
        specs: Sequence[TensorSpec] = call.route.outputs
    else:
        served = call.served
        assert served is not None and call.resolved is not None
        outputs, timings, batch = served.outputs, served.timings, served.batch_size
        specs = call.resolved.manifest.outputs
    usage = measure(request.inputs, timings, batch, call.started)
    usage.rows = answered_rows(specs, outputs, metered.call.rows)
    if call.tokens is not None:
        usage.input_tokens = input_tokens(outputs, call.tokens)
        outputs = _asked(outputs, request.outputs)
        if prediction is not None:
            call.prediction = prediction = replace(prediction, outputs=outputs)
    metered.record_usage(usage)
    call.usage = usage
    call.outputs = outputs
    if prediction is not None:
        log_prediction(env, call, "ok")
    elif env.sampling is not None and env.sampling.active:
        _log_direct(env, call, env.sampling)


def _record_stream(env: Env, call: Call) -> None:
    metered, stream = call.metered, call.stream
    assert metered is not None and stream is not None
    worked = stream.worked_seconds
    if worked is not None:
        # ``compute_ms`` on the usage events: the engine's step time shared to the call
        # (its sequences' share of each step, by tokens computed), or where the backend
        # reports none (a remote one), the time it worked for the call: from its
        # submission to the last chunk it produced.
        metered.record(compute_seconds=stream.compute_seconds or worked)
        if not metered.quantities.get(Unit.INPUT_TOKEN):
            # It ran, but no backend counted the prompt (a remote server that reports
            # usage only at the end, or never): estimated.
            metered.deliver(input_tokens=stream.input_estimate)
    if call.plan is not None:
        ended = call.ended
        if isinstance(ended, ModelportError):
            status = ended.code
        elif ended is not None:
            status = "cancelled"
        else:
            status = "ok"
        log_prediction(env, call, status)


def log_prediction(env: Env, call: Call, status: str) -> None:
    """Queue an endpoint call's prediction-log record: what it asked, who answered and
    what, or ``status`` (the error's code) when nothing did."""
    plan, metered = call.plan, call.metered
    assert plan is not None and metered is not None
    endpoint = plan.route.endpoint
    principal = call.caller.principal
    if call.mode is Mode.STREAM:
        request = call.generate
        assert request is not None
        source = call.source
        assert isinstance(source, PlannedStream)
        provenance = source.provenance
        inputs: Mapping[str, np.ndarray] = prompt_tensor(request.prompt, request.messages)
        outputs: Mapping[str, np.ndarray] | None = (
            texts_tensor(source.texts) if provenance else None
        )
        stages: Mapping[str, float] = {}
    else:
        assert call.request is not None
        inputs = call.request.inputs
        prediction = call.prediction
        provenance = None if prediction is None else prediction.provenance
        outputs = None if prediction is None else prediction.outputs
        stages = {} if prediction is None else prediction.timings
    received_at = call.received_at
    assert received_at is not None  # set by admit, before anything could be logged
    env.prediction_log.record(
        prediction_record(
            prediction_id=metered.prediction_id,
            endpoint=endpoint.name,
            owner=endpoint.tenant,
            chosen=plan.version,
            provenance=provenance,
            inputs=inputs,
            outputs=outputs,
            received_at=received_at,
            latency_seconds=time.perf_counter() - call.received,
            stages=stages,
            tenant=principal.tenant,
            key_id=principal.key_id,
            request_id=call.caller.request_id,
            status=status,
            arm=plan.arm,
            policy=endpoint.log_policy,
        )
    )


def _log_direct(env: Env, call: Call, sampling: PredictionSampling) -> None:
    """Queue a direct version call's record where a sampling policy keeps it."""
    metered, resolved, request = call.metered, call.resolved, call.request
    assert metered is not None and resolved is not None and request is not None
    received_at = call.received_at
    if received_at is None:  # admitted before a policy arrived: decided from the next call
        return
    principal = call.caller.principal
    ref = resolved.ref
    payloads = sampling.decide(metered.prediction_id, principal.tenant, ref.model, ref.version)
    if payloads is None:
        return
    served = call.served
    assert served is not None
    ran = served.provenance.version or ref
    env.prediction_log.record(
        prediction_record(
            prediction_id=metered.prediction_id,
            endpoint="",
            owner=ran.model.split("/", 1)[0],
            chosen=ref,
            provenance=served.provenance,
            inputs=request.inputs,
            outputs=call.outputs,
            received_at=received_at,
            latency_seconds=time.perf_counter() - call.received,
            stages=served.timings,
            tenant=principal.tenant,
            key_id=principal.key_id,
            request_id=call.caller.request_id,
            policy=_PAYLOADS if payloads else _METADATA,
        )
    )


_PAYLOADS = LogPolicy(inputs=True, outputs=True)
_METADATA = LogPolicy()


def _asked(
    outputs: Mapping[str, np.ndarray], asked: tuple[str, ...] | None
) -> Mapping[str, np.ndarray]:
    """``outputs`` without the ``tokens`` the bill needed but the caller did not ask for."""
    if asked is None:
        return outputs
    return {name: array for name, array in outputs.items() if name in asked}


def answered_rows(
    specs: Sequence[TensorSpec], outputs: Mapping[str, np.ndarray], asked: int
) -> int:
    """The rows an answer holds (what ``row`` is charged for): dimension 0 of the outputs
    declared with a variable first dimension, never above the ``asked`` rows; ``asked``
    when no output is declared so (its answer is the whole request's)."""
    found = None
    for spec in specs:
        array = outputs.get(spec.name)
        if array is not None and spec.shape and spec.shape[0] == -1 and array.ndim:
            found = max(found or 0, int(array.shape[0]))
    return asked if found is None else min(found, asked)


def measure(
    inputs: Mapping[str, np.ndarray],
    timings: Mapping[str, float],
    batch_size: int | None,
    started: float,
) -> Usage:
    """What a tensor call used: its rows, its wall time since ``started``
    (``time.perf_counter``), and its rows' share of its batch's execution time: the
    GPU's part of it (``GPU_SECONDS``, where the model ran on one and measured it) as
    ``gpu_ms``, the rest as ``cpu_ms``; so a call's compute is its share of the
    execution either way, and each part is priced by its own device's second."""
    first = next(iter(inputs.values()), None)
    rows = first.shape[0] if first is not None and first.ndim else 1
    execute = float(timings.get("execute", 0.0))
    gpu = min(float(timings.get(GPU_SECONDS, 0.0)), execute)
    batch = batch_size or 0
    part = min(1.0, rows / batch) if batch > 0 else 1.0
    return Usage(
        rows=rows,
        seconds=time.perf_counter() - started,
        cpu_ms=(execute - gpu) * part * 1000,
        gpu_ms=gpu * part * 1000,
    )
