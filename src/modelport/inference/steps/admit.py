"""Step 4, admit: rate → concurrency → budget for the version that is to run
(``inference.admission.admit``), a stream's token bound charged to the
tokens-per-minute allowances too; the decision is left on the ``Caller`` for the
surface's ``RateLimit-*`` headers. What it holds is given back by ``release`` (or, when
a later step fails, ``release.release_on_failure``)."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from modelport.inference import admission
from modelport.inference.call import Call, Mode

if TYPE_CHECKING:
    from modelport.inference.pipeline import Env


async def admit(env: Env, call: Call) -> None:
    ref = call.ref
    assert ref is not None
    sampling = env.sampling
    if call.endpoint is not None or (sampling is not None and sampling.active):
        # The prediction log's clock starts here, as the caller waits (a direct call's
        # only where some sampling policy may keep it: else the log costs it nothing).
        call.received_at = datetime.now(UTC)
        call.received = time.perf_counter()
    tokens = None
    if call.mode is Mode.STREAM:
        request = call.generate
        assert request is not None
        # Tokens per minute count what the call may use at most, before it runs.
        tokens = request.prompt_bytes + request.output_bound
    call.admission = await admission.admit(env.limits, call.caller, ref.model, tokens=tokens)
