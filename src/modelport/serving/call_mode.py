"""The seam between the one replica-attempt loop (``modelport.serving.replica_loop``)
and the kinds of call it runs: a whole answer (``UnaryMode``, ``serving.dispatch``)
and a stream up to its first chunk (``StreamMode``, ``serving.stream_dispatch``).

The loop owns what both share: choosing replicas, breakers, the attempt budget, the
fallback chain and provenance. A mode owns only what differs: how one backend is
called, when its breaker hears of a success, and what the caller is handed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, TypeVar

from modelport.serving.backends.base import Backend
from modelport.serving.breaker import CircuitBreaker
from modelport.serving.types import Attempt, Capabilities, Provenance, VersionRef

if TYPE_CHECKING:
    from modelport.serving.fallback import CacheOption, StaticOption


class CallRequest(Protocol):
    """What the loop reads of a request."""

    @property
    def version(self) -> VersionRef: ...

    @property
    def deadline(self) -> float: ...


class Accepted(Protocol):
    """What the loop reads of a backend's accepted call: who accepted it."""

    @property
    def backend(self) -> str: ...


ReqT = TypeVar("ReqT", bound=CallRequest)
WonT = TypeVar("WonT", bound=Accepted)
OutT = TypeVar("OutT")
OutT_co = TypeVar("OutT_co", covariant=True)


class CallMode(Protocol[ReqT, WonT, OutT_co]):
    """One kind of call, as the replica loop runs it."""

    what: str
    """The verb naming the call in errors: "serve" ("no backend can serve acme/m:1")."""
    goal: str
    """What the deadline may pass before: "an answer", "a stream"."""

    def unmet(self, capabilities: Capabilities, request: ReqT) -> str | None:
        """Why a backend that runs the version cannot take this request (None: it can)."""
        ...

    async def attempt(self, backend: Backend, request: ReqT, until: float) -> WonT:
        """Call ``backend`` once, giving up at ``until``. Failures raise as
        ``ModelportError`` (anything else is the backend's bug, for the loop)."""
        ...

    def accepted(self, request: ReqT, won: WonT, breaker: CircuitBreaker, epoch: int) -> WonT:
        """``won`` as the caller will have it. Its breaker hears of the success here
        (a whole answer) or when what it hands over ends (a stream)."""
        ...

    def retarget(self, request: ReqT, version: VersionRef) -> ReqT:
        """The same request, for a fallback ``version``."""
        ...

    def answer(self, won: WonT, provenance: Provenance) -> OutT_co:
        """What the caller gets from an accepted call."""
        ...

    def stand_in(
        self,
        option: CacheOption | StaticOption,
        request: ReqT,
        reason: str,
        attempts: Sequence[Attempt],
    ) -> OutT_co | None:
        """A fallback answer that needs no backend (None: none fits this call)."""
        ...
