"""Step 3b, degrade: a call that gives way (its priority, or its tenant's tier, as the
rule says: ``inference.degrade``) of a version whose predicted queue wait passes the
rule's threshold goes to the configured fallback (a call of it, as the caller may make:
the same access rule; for a unary call, one taking the same inputs), or is shed with
503 ``degraded`` and ``Retry-After``. An endpoint's call follows the endpoint's policy
over the installation's, measured on the version its route chose; moved to a fallback,
it runs as a call of that version (not through the route): a unary one is still
answered and logged as the endpoint's, its provenance a ``version`` fallback for the
reason ``degraded``. Other calls, and every
call where no policy is wired, pass untouched.
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
    ref = call.ref
    if policy is None or call.replayed is not None or ref is None:
        return
    priority: Priority | None
    if call.mode is Mode.STREAM:
        assert call.generate is not None
        priority = call.generate.priority
    else:
        assert call.request is not None
        priority = call.request.priority
    route = call.route
    if priority is None:
        priority = Priority.INTERACTIVE if route is None else route.endpoint.priority
    rule = policy.rule(ref.model, None if route is None else route.endpoint.degradation)
    if rule is None:
        return
    by_priority = rule.by_priority(priority)
    if not by_priority and not rule.tiers:
        return
    wait = policy.over(ref, rule.threshold_seconds)
    if wait is None:
        return
    if not by_priority:
        assert policy.tier_source is not None  # rule() leaves no tiers without one
        tier = await policy.tier_source.tier_of(call.caller.principal.tenant)
        if tier not in rule.tiers:
            return
        why = f"calls of {tier} tenants are"
    else:
        why = f"{priority} calls are"
    if rule.fallback is not None and await _serve_by(
        env, call, rule.fallback, rule.threshold_seconds
    ):
        return
    raise Unavailable(
        f"{ref.model} is under load (a predicted wait of {wait:.1f} s): {why} shed until it drains",
        code=DEGRADED,
        retry_after=wait,
        model=ref.model,
    )


async def _serve_by(env: Env, call: Call, fallback: str, threshold_seconds: float) -> bool:
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
    if policy.over(chosen, threshold_seconds) is not None:
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
    call.degraded = True
    if call.mode is Mode.STREAM:
        call.plan = None  # an endpoint's stream: served as a stream of the fallback
    return True


def _signature(specs: Sequence[TensorSpec]) -> list[tuple[str, str]]:
    return [(s.name, s.datatype) for s in specs]
