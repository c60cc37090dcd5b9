"""Step 10, release: the admission given back (its concurrency slot), and a stream's
output check told it ended. Synchronous on purpose: it runs even when the call was
cancelled. ``release_on_failure`` is the admission's undo when a later step raised."""

from __future__ import annotations

from typing import TYPE_CHECKING

from modelport.inference.call import Call

if TYPE_CHECKING:
    from modelport.inference.pipeline import Env


async def release(env: Env, call: Call) -> None:
    admission, call.admission = call.admission, None
    if admission is not None:
        admission.release()
    if call.check is not None:
        call.check.ended()


async def release_on_failure(env: Env, call: Call, exc: BaseException) -> None:
    await release(env, call)
