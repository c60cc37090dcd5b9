"""Step 2, authorize: may the resolved version be called now.

A version of another tenant only once approved or deployed (403
``version_not_approved``); a version whose publisher mounted another tenant's files
only while its publisher may still read them (403 ``version_files_withdrawn``). An
endpoint's route was checked when resolved; its chosen version's files are checked by
``require_files`` once read chose it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from modelport.inference.access import require_callable_state, require_files_usable
from modelport.inference.call import Call
from modelport.inference.targets import Target

if TYPE_CHECKING:
    from modelport.inference.pipeline import Env


async def authorize(env: Env, call: Call) -> None:
    resolved = call.resolved
    if resolved is None:
        return  # an endpoint: its version is chosen by read
    owner = resolved.model.partition("/")[0]
    require_callable_state(call.caller.principal, owner, resolved)
    await require_files(env, resolved)


async def require_files(env: Env, version: Target) -> None:
    """The version's files are still its publisher's to use (no query where it holds
    them all)."""
    if version.borrowed:
        await require_files_usable(env.facts, version)
