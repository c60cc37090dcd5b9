"""Step 7, dispatch: the call goes to the serving layer.

A version's unary call goes through the ``Dispatcher`` (breakers, health, retries,
metrics) to one of its replicas (this process's model host is the ``LocalBackend``),
or is answered from the response cache on a hit. An endpoint's goes through its
router (canary, shadow, the fallback chain); a failure is in its prediction log. A
stream is opened on its source (the version's backend, or the endpoint's routing up to
the first chunk) and handed back as a ``CallStream`` once its first chunk came, so
refusals come before any chunk; its last steps run when it ends
(``Pipeline.finish``).

Once a unary call is answered, the surface's watch on its caller stops: from there
the call is billed as answered, whoever reads it.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from modelport.errors import ModelportError
from modelport.inference.call import Call, Mode
from modelport.inference.degrade import DEGRADED
from modelport.inference.steps.record import log_prediction
from modelport.inference.streaming import CallStream
from modelport.inference.tokens import with_tokens
from modelport.runtime.types import Priority
from modelport.serving.routing.router import Plan, Prediction
from modelport.serving.types import (
    BackendRequest,
    FallbackKind,
    Provenance,
    Served,
    StreamRequest,
)

if TYPE_CHECKING:
    from modelport.inference.pipeline import Env


async def dispatch(env: Env, call: Call) -> None:
    if call.mode is Mode.STREAM:
        await _stream(env, call)
        return
    metered, request, ref = call.metered, call.request, call.ref
    assert metered is not None and request is not None and ref is not None
    outputs = request.outputs if call.tokens is None else with_tokens(request.outputs)
    reservation = metered.reservation.id if metered.reservation is not None else ""
    call.started = time.perf_counter()
    plan = call.plan
    if plan is not None and not call.degraded:
        try:
            call.prediction = await env.serving.router.predict(
                plan,
                request.inputs,
                deadline=call.deadline,
                priority=request.priority,
                outputs=outputs,
                parameters=request.parameters,
                prediction_id=metered.prediction_id,
                call_id=reservation,
            )
        except ModelportError as exc:
            log_prediction(env, call, exc.code)
            raise
    else:
        lookup = call.lookup
        hit = None if lookup is None else lookup.hit
        if hit is not None and lookup is not None:
            cached = Provenance(ref, None, age_seconds=lookup.age_seconds, cached=True)
            call.served = Served(hit.outputs, cached)
        else:
            call.served = await env.dispatcher.dispatch(
                BackendRequest(
                    ref,
                    request.inputs,
                    env.clock.monotonic() + call.timeout,
                    request.priority or Priority.INTERACTIVE,
                    outputs,
                    request.parameters,
                    metered.prediction_id,
                    reservation,
                ),
                env.replicas_for(ref),
            )
        if plan is not None:  # an endpoint's call, degraded: answered as the endpoint's
            call.prediction = _degraded(plan, metered.prediction_id, call.served, call.started)
            call.served = None
    watch = call.caller.watch
    if watch is not None:
        watch.stop()  # answered: billed as such, whoever reads it


def _degraded(plan: Plan, prediction_id: str, served: Served | None, started: float) -> Prediction:
    """An endpoint call's answer by the fallback it was moved to under load."""
    assert served is not None and plan.route.deployment is not None
    ran = served.provenance
    return Prediction(
        id=prediction_id,
        endpoint=plan.endpoint,
        deployment=plan.route.deployment,
        chosen=plan.version,
        outputs=served.outputs,
        provenance=Provenance(
            ran.version, ran.backend, FallbackKind.VERSION, DEGRADED, ran.attempts
        ),
        seconds=time.perf_counter() - started,
        timings=served.timings,
        batch_size=served.batch_size,
    )


async def _stream(env: Env, call: Call) -> None:
    metered, request, ref, source = call.metered, call.generate, call.ref, call.source
    assert metered is not None and request is not None and ref is not None
    assert source is not None and request.max_tokens is not None  # the read step's
    chunks = source.stream(
        StreamRequest(
            version=ref,
            prompt=request.prompt,
            max_tokens=request.max_tokens,
            deadline=call.deadline,
            task=call.task,
            parameters=request.parameters,
            request_id=request.request_id,
            call_id=metered.reservation.id if metered.reservation else "",
            messages=request.messages,
            n=request.n,
            to_context_end=request.to_context_end,
            priority=request.priority,
            prediction_id=metered.prediction_id,
        )
    )
    finish = env.pipeline.finish
    stream = call.stream = CallStream(
        chunks,
        metered,
        call.deadline,
        request.output_bound,
        request.n,
        end=lambda ended: finish(call, ended),
        input_estimate=request.input_estimate,
        check=call.check,
        clock=env.clock,
    )
    await stream.start()
