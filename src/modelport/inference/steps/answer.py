"""Step 11, answer (unary calls): the caller's tenant's moderation policy checks the
outputs (blocked: withheld, though billed as answered: the model ran, or its answer was
reused), then the ``InferenceResult``; an answer under an idempotency key is encoded
and kept, so a repeat is answered the same."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio.to_thread

from modelport.inference.call import Call
from modelport.inference.steps.moderate import tensors
from modelport.inference.types import InferenceResult
from modelport.moderation.types import Stage

if TYPE_CHECKING:
    from modelport.inference.pipeline import Env


async def answer(env: Env, call: Call) -> None:
    outputs, usage, metered = call.outputs, call.usage, call.metered
    assert outputs is not None and usage is not None and metered is not None
    prediction = call.prediction
    if prediction is not None:
        ran = prediction.version
        if call.policy is not None:
            model, version = ("", "") if ran is None else (ran.model, ran.version)
            await tensors(env, call, call.policy, Stage.OUTPUT, outputs, model, version)
        assert call.route is not None
        result = InferenceResult(
            outputs,
            call.route.endpoint.name,
            "" if ran is None else ran.ref,
            usage,
            prediction.provenance,
            prediction.timings,
            prediction.batch_size,
            prediction.id,
            prediction,
        )
    else:
        served, resolved, lookup = call.served, call.resolved, call.lookup
        assert served is not None and resolved is not None
        if call.policy is not None:
            await tensors(
                env, call, call.policy, Stage.OUTPUT, outputs, resolved.model, resolved.version
            )
        result = InferenceResult(
            outputs,
            resolved.model,
            resolved.version,
            usage,
            served.provenance,
            served.timings,
            served.batch_size,
            metered.prediction_id,
            cache=None if lookup is None else ("miss" if lookup.hit is None else "hit"),
        )
    call.result = result
    claim = call.claim
    if claim is not None:
        result.body = call.encode(result) if call.encode is not None else b""
        await anyio.to_thread.run_sync(env.serving.idempotency.complete, claim, 200, result.body)
        call.claim = None
