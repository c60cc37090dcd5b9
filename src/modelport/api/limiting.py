"""Limits on the HTTP surfaces.

- Inference (``/v2`` infer, later ``/v1`` and endpoint predict): after
  authentication, ``async with admitted(request, principal, model):`` charges
  the rate limits, takes a concurrency slot, checks the budget, and gives the
  slot back when the block ends, whatever ends it (an error, a cancelled
  request after the client went away).
- ``/api``: ``check_api_rate`` charges mutations (not reads) to the caller's
  tenant and key allowances, counted apart from inference.
- ``RateLimitHeaders``: every response of a rate-limited call carries the
  allowance it was charged to::

      RateLimit-Limit: 50          units per minute of the most restrictive allowance
      RateLimit-Remaining: 49      units left in it now
      RateLimit-Reset: 2           seconds until it is whole again

  and a refusal (429 ``rate_limited``) also ``Retry-After``, in seconds.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from modelport.api.deps import get_services
from modelport.tenancy import Principal
from modelport.tenancy.limits import API, Admission, RateDecision, RateLimited, Subject

STATE_KEY = "ratelimit"
_MUTATIONS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def subject_of(principal: Principal, model: str | None = None) -> Subject:
    """The limiter's keys for a principal: its tenant (or its own id when it has
    none, e.g. the operator) and API key."""
    return Subject(tenant=principal.tenant or principal.id, key=principal.key_id, model=model)


def remember(request: Request, decision: RateDecision) -> None:
    """Leave the decision for ``RateLimitHeaders`` to put on the response."""
    if decision.limit:
        request.state.ratelimit = decision


async def admit(request: Request, principal: Principal, model: str) -> Admission:
    """Rate → concurrency → budget for one inference call of ``model`` (``owner/name``);
    raises 429 ``rate_limited`` / ``concurrency_limited`` or 402 ``budget_exceeded``.
    The caller must ``release`` the admission, whatever happens next."""
    limits = get_services(request).limits
    subject = subject_of(principal, model)
    try:
        if limits.is_warm(subject):
            admission = limits.admit(subject, stale_ok=True)
        elif limits.admitter is not None and limits.is_cached(subject):
            # Redis: batched with the other calls' admissions, no thread hop per call.
            admission = await limits.admit_grouped(subject)
        else:
            admission = await run_in_threadpool(limits.admit, subject)
    except RateLimited as exc:
        remember(request, exc.decision)
        raise
    remember(request, admission.decision)
    return admission


@asynccontextmanager
async def admitted(request: Request, principal: Principal, model: str) -> AsyncIterator[Admission]:
    """``admit`` for the length of a block."""
    admission = await admit(request, principal, model)
    try:
        yield admission
    finally:
        # Synchronous on purpose: it must run even when the request was cancelled. It
        # does no I/O (a Redis release is queued).
        admission.release()


def check_api_rate(request: Request, principal: Principal) -> None:
    """Charge an ``/api`` mutation to the caller's allowances (reads are free).
    Blocking: call from a worker thread (sync dependencies run in one)."""
    path = request.url.path
    if request.method not in _MUTATIONS or not path.startswith("/api/"):
        return
    if path.endswith(":predict"):
        return  # an inference: charged by the inference gate, not as an /api mutation
    limits = get_services(request).limits
    try:
        decision = limits.check_rate(subject_of(principal), API)
    except RateLimited as exc:
        remember(request, exc.decision)
        raise
    remember(request, decision)


def rate_headers(decision: RateDecision) -> list[tuple[bytes, bytes]]:
    return [
        (b"ratelimit-limit", str(decision.limit).encode()),
        (b"ratelimit-remaining", str(decision.remaining).encode()),
        (b"ratelimit-reset", str(math.ceil(decision.reset_after)).encode()),
    ]


class RateLimitHeaders:
    """ASGI middleware: adds ``RateLimit-*`` headers to responses of charged calls."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                state: dict[str, Any] = scope.get("state") or {}
                decision = state.get(STATE_KEY)
                if isinstance(decision, RateDecision):
                    message = {
                        **message,
                        "headers": [*message.get("headers", ()), *rate_headers(decision)],
                    }
            await send(message)

        await self.app(scope, receive, send_with_headers)
