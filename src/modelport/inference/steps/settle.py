"""Step 9, settle: the metered call settled by what it used (``InferenceMeter``;
durable before the answer: the journal, or the grouped settlement commit). A unary
call's miss is then stored in the response cache, as the model gave it. A stream is
settled when it ends: ``succeeded`` for what was delivered, or by what ended it
(cancelled, timeout, failed; a backend that broke once it had begun ran, so it is
``failed``, not given back whole).

``settle_failed`` is the reservation's undo when a later step of a call raised: settled
``cancelled`` for a caller that left, given back whole for a refusal before running,
else ``failed``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from modelport.inference.call import Call, Mode
from modelport.inference.streaming import status_of
from modelport.metering.types import UsageStatus

if TYPE_CHECKING:
    from modelport.inference.pipeline import Env


async def settle(env: Env, call: Call) -> None:
    metered = call.metered
    assert metered is not None
    call.settled = True
    meter = env.meter
    if call.mode is Mode.STREAM:
        stream = call.stream
        assert stream is not None
        ended = call.ended
        if ended is None:
            await meter.succeeded(metered)
            stream.status = UsageStatus.SUCCEEDED
        else:
            await meter.failed(metered, stream.settled_as(ended))
            stream.status = status_of(ended)
        return
    await meter.succeeded(metered)  # durable before the answer
    lookup, cache, served = call.lookup, env.cache, call.served
    if lookup is not None and lookup.hit is None and cache is not None and served is not None:
        await cache.store(lookup, served.outputs)


async def settle_failed(env: Env, call: Call, exc: BaseException) -> None:
    metered = call.metered
    if metered is None or call.settled:
        return
    call.settled = True
    await env.meter.failed(metered, exc)
