"""HTTP glue of the inference surfaces around ``InferenceService``: who calls (from the
request), and what the service said back about the call (the rate decision for the
``RateLimit-*`` headers, the tenant for the audit log), put where the surfaces'
middlewares look for them."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

from starlette.requests import ClientDisconnect, Request

from modelport.api.limiting import STATE_KEY
from modelport.inference.types import Caller
from modelport.tenancy import Principal

T = TypeVar("T")


def caller_of(request: Request, principal: Principal) -> Caller:
    return Caller(principal, request.scope["state"].get("request_id", ""))


def note_call(request: Request, caller: Caller) -> None:
    """Leave what the service decided on the request's state (in a ``finally``: refused
    calls carry their headers and audit tenant too)."""
    state = request.scope["state"]
    if caller.about is not None:
        state["audit_tenant"] = caller.about
    rate = caller.rate
    if rate is not None and rate.limit:
        state[STATE_KEY] = rate


async def answered(request: Request, caller: Caller, call: Awaitable[T]) -> T | None:
    """What ``call`` answers; None when its caller left (mid-body, or cancelled by its
    watch once the body was read: nobody reads an answer, the surface answers 499).
    Whatever ends the call, the watch stops and the service's decisions reach the
    request's state (``note_call``)."""
    try:
        return await call
    except ClientDisconnect:
        return None
    except asyncio.CancelledError:
        if caller.watch is None or not caller.watch.caller_gone():
            raise  # not the caller's doing (the server is stopping)
        return None
    finally:
        if caller.watch is not None:
            caller.watch.stop()
        note_call(request, caller)
