"""Limits on the HTTP surfaces.

- Inference: admitted by ``InferenceService`` (rate, concurrency, budget); its
  decision reaches the headers through ``api.calls.note_call``.
- ``/api``: ``check_api_rate`` charges mutations (not reads) to the caller's
  tenant and key allowances, counted apart from inference.
- the envelope (``api.envelope``): every response of a rate-limited call carries the
  allowance it was charged to::

      RateLimit-Limit: 50          units per minute of the most restrictive allowance
      RateLimit-Remaining: 49      units left in it now
      RateLimit-Reset: 2           seconds until it is whole again

  and a refusal (429 ``rate_limited``) also ``Retry-After``, in seconds.
"""

from __future__ import annotations

import math

from starlette.requests import Request

from modelport.api import deps
from modelport.tenancy import Principal
from modelport.tenancy.limits import API, RateDecision, RateLimited, Subject

STATE_KEY = "ratelimit"
_MUTATIONS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def subject_of(principal: Principal, model: str | None = None) -> Subject:
    """The limiter's keys for a principal: its tenant (or its own id when it has
    none, e.g. the operator) and API key."""
    return Subject(tenant=principal.tenant or principal.id, key=principal.key_id, model=model)


def remember(request: Request, decision: RateDecision) -> None:
    """Leave the decision for the envelope to put on the response (``rate_headers``)."""
    if decision.limit:
        request.state.ratelimit = decision


def check_api_rate(request: Request, principal: Principal) -> None:
    """Charge an ``/api`` mutation to the caller's allowances (reads are free).
    Blocking: call from a worker thread (sync dependencies run in one)."""
    path = request.url.path
    if request.method not in _MUTATIONS or not path.startswith("/api/"):
        return
    if path.endswith(":predict"):
        return  # an inference: charged by the inference gate, not as an /api mutation
    limits = deps.limits_service(request)
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
