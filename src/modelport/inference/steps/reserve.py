"""Step 6, reserve: the call priced and its upper cost held (``InferenceMeter.open``:
reservations grouped, drawn from the caller's hold where it names one; 402
``budget_exceeded``). A unary call is held for its rows and its input-token bound; a
stream for its prompt (at most one token per byte) and ``max_tokens`` output tokens.

For a version declared deterministic, the question is looked up in the response cache
first (``inference.cache``; a tenant that declared no-cache skips it): a hit is priced by
the ``cache_hit`` rule where there is one and answered by ``dispatch`` from the cache.
An endpoint call is never answered from it: its route's canary, shadow and prediction
log see every call.

``call_info`` is the one place a metered call's ``CallInfo`` is made.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from modelport.inference.call import Call, Mode
from modelport.metering.meter import stream_call
from modelport.metering.types import CallInfo, Unit
from modelport.serving.capability import request_rows
from modelport.serving.types import VersionRef
from modelport.tenancy.types import Principal

if TYPE_CHECKING:
    from modelport.inference.pipeline import Env


async def reserve(env: Env, call: Call) -> None:
    ref = call.ref
    assert ref is not None
    caller = call.caller
    if call.mode is Mode.STREAM:
        generate = call.generate
        assert generate is not None
        info = call_info(
            caller.principal,
            ref,
            call.timeout,
            task=call.task,
            endpoint=call.endpoint,
            request_id=generate.request_id,
            call_id=caller.call_id,
            hold_id=caller.hold_id,
        )
        bounded = stream_call(
            info, prompt_bytes=generate.prompt_bytes, max_tokens=generate.output_bound
        )
        call.metered = await env.meter.open(bounded)
        return
    request = call.request
    assert request is not None
    cache = env.cache
    if cache is not None and call.route is None and ref.manifest.deterministic:
        principal = caller.principal
        call.lookup = await cache.lookup(
            principal.tenant,
            principal.id,
            ref.manifest_digest,
            request.inputs,
            request.parameters,
            request.outputs,
        )
    tokens = call.tokens
    call.metered = await env.meter.open(
        call_info(
            caller.principal,
            ref,
            call.timeout,
            endpoint=call.endpoint,
            request_id=caller.request_id,
            call_id=caller.call_id,
            hold_id=caller.hold_id,
            quantities={} if tokens is None else {Unit.INPUT_TOKEN: tokens},
            cached=call.lookup is not None and call.lookup.hit is not None,
            rows=request_rows(ref, request.inputs),
        )
    )


def call_info(
    principal: Principal,
    version: VersionRef,
    timeout: float,
    *,
    task: str = "",
    endpoint: str | None = None,
    request_id: str = "",
    call_id: str | None = None,
    hold_id: str | None = None,
    quantities: dict[Unit, int] | None = None,
    cached: bool = False,
    rows: int = 1,
) -> CallInfo:
    """The metered call of ``version`` by ``principal`` within ``timeout`` seconds."""
    return CallInfo(
        tenant=principal.tenant or principal.id,
        key_id=principal.key_id,
        model=version.model,
        version=version.version,
        manifest_digest=version.manifest_digest,
        task=task,
        endpoint=endpoint,
        request_id=request_id,
        timeout_seconds=timeout,
        call_id=call_id,
        hold_id=hold_id,
        quantities={} if quantities is None else quantities,
        cached=cached,
        rows=rows,
    )
