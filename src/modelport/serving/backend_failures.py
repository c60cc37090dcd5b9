"""Which backends may try a version, and what a backend's failure says of it: for the
replica loop (``replica_loop``), whole calls and streams before their first chunk alike."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from modelport.errors import ModelportError, Unavailable
from modelport.serving.backends.base import Backend
from modelport.serving.breaker import CircuitBreaker
from modelport.serving.fallback import CALLER_ERRORS
from modelport.serving.health import HealthBoard
from modelport.serving.types import Capabilities, Health

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


def capable_in_order(
    replicas: Sequence[Backend],
    board: HealthBoard,
    unmet: Callable[[Capabilities], str | None],
    what: str,
) -> Sequence[Backend]:
    """The replicas whose capabilities meet the call (``unmet`` answers why not, or
    None), in the router's order with those last seen unhealthy at the end (a stable
    sort); 503 ``no_capable_backend`` naming each refusal when none can ``what``."""
    capable: list[Backend] = []
    refusals: list[str] = []
    for backend in replicas:
        why = unmet(backend.capabilities())
        if why is None:
            capable.append(backend)
        else:
            refusals.append(f"{backend.name}: {why}")
    if not capable:
        raise Unavailable(
            f"no backend can {what}" + (": " + "; ".join(refusals) if refusals else ""),
            code="no_capable_backend",
            scope="version",
        )
    if len(capable) == 1:
        return capable
    return sorted(capable, key=lambda b: board.health(b.name) is Health.UNHEALTHY)
