"""HTTP glue of the inference surfaces around ``InferenceService``: who calls (from the
request), and what the service said back about the call (the rate decision for the
``RateLimit-*`` headers, the tenant for the audit log), put where the surfaces'
middlewares look for them."""

from __future__ import annotations

from starlette.requests import Request

from modelport.api.limiting import STATE_KEY
from modelport.inference.types import Caller
from modelport.tenancy import Principal


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
