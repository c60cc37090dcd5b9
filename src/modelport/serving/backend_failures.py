"""What a backend's failure says of the backend, shared by whole calls (``dispatch``)
and streams before their first chunk (``stream_dispatch``)."""

from __future__ import annotations

from collections.abc import Sequence

from modelport.errors import ModelportError, Unavailable
from modelport.serving.breaker import CircuitBreaker
from modelport.serving.fallback import CALLER_ERRORS
from modelport.serving.health import HealthBoard

REFUSED = "refused"
"""The outcome of a failure that is the caller's: raised as it is, no other backend tried."""


def judge_failure(error: ModelportError, breaker: CircuitBreaker, epoch: int) -> str:
    """Tell the backend's ``breaker`` of ``error`` and answer the outcome to count:
    ``refused`` (the caller's fault), ``overloaded`` and a version's own failure (not
    the backend's: the breaker ignores them), ``timeout`` or ``failed``."""
    if error.kind in CALLER_ERRORS:
        breaker.on_ignored(epoch)
        return REFUSED
    if error.kind == "overloaded" or error.extra.get("scope") == "version":
        breaker.on_ignored(epoch)
        return "overloaded" if error.kind == "overloaded" else "failed"
    breaker.on_failure(epoch)
    return "timeout" if error.kind == "deadline" else "failed"


def circuits_open(board: HealthBoard, what: str, open_breakers: Sequence[str]) -> Unavailable:
    """The answer when every backend that could ``what`` (e.g. "serve acme/m:1") is out
    of service, retried after the soonest breaker's wait."""
    retry_after = min(
        (board.breaker(name).snapshot().retry_after for name in open_breakers),
        default=1.0,
    )
    return Unavailable(
        f"every backend that can {what} is out of service (circuit open)",
        code="no_available_backend",
        retry_after=max(1.0, retry_after),
        backends=list(open_breakers),
    )
