"""Step 3b, degrade: a low-priority call of a version whose predicted queue wait passes
the threshold goes to the model's configured fallback (a call of it, as the caller may
make: the same access rule; for a unary call, one taking the same inputs), or is shed
with 503 ``degraded`` and ``Retry-After`` (``inference.degrade``). Interactive calls,
and every call where no policy is wired, pass untouched.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from modelport.errors import Forbidden, NotFound, Unavailable
from modelport.inference.call import Call, Kind, Mode
from modelport.inference.degrade import DEGRADED
from modelport.inference.steps.resolve import task_of
from modelport.inference.tokens import input_token_bound
from modelport.inference.types import Caller, ModelTarget
from modelport.manifest import TensorSpec
from modelport.runtime.types import Priority

if TYPE_CHECKING:
    from modelport.inference.pipeline import Env


async def degrade(env: Env, call: Call) -> None:
    policy = env.degradation
    if policy is None or call.route is not None or call.replayed is not None:
        return  # an endpoint's route has fallbacks of its own
    priority: Priority | None
    if call.mode is Mode.STREAM:
        assert call.generate is not None
        priority = call.generate.priority
    else:
        assert call.request is not None
        priority = call.request.priority
    ref = call.ref
    if not policy.degrades(priority) or ref is None:
        return
    wait = policy.over(ref)
    if wait is None:
        return
    fallback = policy.fallbacks.get(ref.model)
    if fallback is not None and await _serve_by(env, call, fallback):
        return
    raise Unavailable(
        f"{ref.model} is under load (a predicted wait of {wait:.1f} s): "
        f"{priority} calls are shed until it drains",
        code=DEGRADED,
        retry_after=wait,
        model=ref.model,
    )


async def _serve_by(env: Env, call: Call, fallback: str) -> bool:
    """Move ``call`` to ``fallback`` if the caller may call it, it takes the call's
    inputs and is not itself over the threshold; whether it did."""
    owner, _, rest = fallback.partition("/")
    name, _, version = rest.partition(":")
    target = ModelTarget(owner, name, version or None)
    probe = Call(Caller(call.caller.principal), target, call.mode, Kind.VERSION)
    try:
        for step in env.pipeline.plan(probe).head:
            if step.resolving:
                await step.run(env, probe)
    except (NotFound, Forbidden):
        return False
    chosen, resolved = probe.ref, probe.resolved
    assert chosen is not None and resolved is not None and call.ref is not None
    policy = env.degradation
    assert policy is not None
    if policy.over(chosen) is not None:
        return False
    if call.mode is Mode.STREAM:
        call.task = task_of(chosen)
        call.source = env.replicas_for(chosen)[0]
    else:
        if _signature(chosen.manifest.inputs) != _signature(call.ref.manifest.inputs):
            return False
        assert call.request is not None
        call.tokens = input_token_bound(call.request.inputs) if resolved.counts_tokens else None
    call.resolved, call.ref = resolved, chosen
    return True


def _signature(specs: Sequence[TensorSpec]) -> list[tuple[str, str]]:
    return [(s.name, s.datatype) for s in specs]
