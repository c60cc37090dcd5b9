"""The admission step of every call, unary or streamed, of a version or of an endpoint,
whatever the surface (``/v2``, ``:predict``, ``/v1``, jobs).

``admit`` lets one call in or refuses it: rate → concurrency → budget
(``LimitService.admit_on_loop``), then, for a stream, the most tokens it may use charged
to the tokens-per-minute allowances (a charge cannot be taken back, and a stream refused
midway helps nobody). What the limiter decided, refused or not, is left on the
``Caller`` (``caller.rate``), where the surfaces find it for the ``RateLimit-*``
headers: the requests allowance the call was charged to, or the allowance that refused
it.
"""

from __future__ import annotations

import asyncio

from modelport.inference.types import Caller
from modelport.tenancy.limits import Admission, LimitService, RateLimited, Subject


async def admit(
    limits: LimitService, caller: Caller, model: str, *, tokens: int | None = None
) -> Admission:
    """Admit one call of ``model`` by ``caller``, charging ``tokens`` to its
    tokens-per-minute allowances when given (a stream's bound). Raises 429
    ``rate_limited`` / ``concurrency_limited`` or 402 ``budget_exceeded``. The caller
    must ``release`` the admission, whatever happens next (a refusal holds nothing)."""
    principal = caller.principal
    subject = Subject(tenant=principal.tenant or principal.id, key=principal.key_id, model=model)
    try:
        admission = await limits.admit_on_loop(subject)
    except RateLimited as exc:
        caller.rate = exc.decision
        raise
    caller.rate = admission.decision
    if tokens is None:
        return admission
    try:
        await charge_tokens(limits, subject, tokens)
    except RateLimited as exc:
        caller.rate = exc.decision
        admission.release()
        raise
    except BaseException:
        admission.release()
        raise
    return admission


async def charge_tokens(limits: LimitService, subject: Subject, tokens: int) -> None:
    """Charge ``tokens`` to the subject's tokens-per-minute allowances (429
    ``rate_limited``); in a thread when the limiter is over the network."""
    if limits.blocking:
        await asyncio.to_thread(limits.charge_tokens, subject, tokens)
    else:
        limits.charge_tokens(subject, tokens)
