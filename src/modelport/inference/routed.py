"""Routed calls: a task alias (``task_routes.RouteTarget``) resolved into an ordered list
of the versions its caller may call, then tried in order until one answers.

The candidates are the task's models (``route_facts.RouteFacts``) that the caller may
call by the one access rule: each goes through the pipeline's own resolving steps
(``resolve``, ``authorize``: visibility and grants, the callable state, the files), and
one refused is dropped unseen (a model the caller may not see is never named to it).
Live latency is the ``LatencyBoard``'s. ``task_routes.rank`` orders the rest.

Each try is a whole call of that version through the pipeline, so it is admitted,
reserved at that version's prices and settled as that version's: a try that fails is
settled failed (its reservation given back, under its price's failure rule) before the
next is reserved, and the call that answers is the one billed. A try falls through to
the next only on a failure the next version may not share (the backend unavailable,
overloaded, or failing inside); a refusal of the request itself (bad input, a budget
or rate limit) is the caller's answer at once.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

import anyio.to_thread

from modelport.errors import Forbidden, ModelportError, NotFound
from modelport.inference.call import Call, Kind, Mode
from modelport.inference.route_facts import LatencyBoard, RouteFacts
from modelport.inference.task_routes import Candidate, RouteTarget, no_candidate, rank
from modelport.inference.types import Caller, ModelTarget

if TYPE_CHECKING:
    from modelport.inference.pipeline import Env

T = TypeVar("T")

FALLS_THROUGH = frozenset({"unavailable", "overloaded", "internal"})
"""The error kinds a try falls through to the next candidate on."""


class TaskRouter:
    """Routes task aliases (see the module docstring). One per process."""

    def __init__(self, facts: RouteFacts, board: LatencyBoard | None = None) -> None:
        self.facts = facts
        self.board = board if board is not None else LatencyBoard()

    async def candidates(self, env: Env, caller: Caller, target: RouteTarget) -> list[Candidate]:
        """The versions to try for ``target``, in order; 404/422 ``route_no_candidate``
        when none."""
        found = await anyio.to_thread.run_sync(self.facts.candidates, target.task)
        allowed = [self.board.live(c) for c in found if await _may_call(env, caller, c)]
        ranked = rank(allowed, target.preferences)
        if not ranked.order:
            raise no_candidate(target, ranked if allowed else None)
        return list(ranked.order)

    async def call(
        self,
        env: Env,
        caller: Caller,
        target: RouteTarget,
        attempt: Callable[[ModelTarget], Awaitable[T]],
    ) -> tuple[T, Candidate]:
        """``attempt`` on each candidate in order until one answers: its answer and the
        candidate; the last failure when none does."""
        order = await self.candidates(env, caller, target)
        failure: ModelportError | None = None
        for candidate in order:
            started = time.perf_counter()
            try:
                answer = await attempt(
                    ModelTarget(candidate.owner, candidate.name, candidate.version)
                )
            except ModelportError as exc:
                if exc.kind not in FALLS_THROUGH:
                    raise
                failure = exc
                continue
            ms = (time.perf_counter() - started) * 1000
            self.board.observe(candidate.model, candidate.version, ms)
            return answer, candidate
        assert failure is not None
        raise failure


async def _may_call(env: Env, caller: Caller, candidate: Candidate) -> bool:
    """Whether ``caller`` may call ``candidate``: the pipeline's resolving steps, on a
    call of its own (nothing of it is kept)."""
    probe = Call(
        Caller(caller.principal),
        ModelTarget(candidate.owner, candidate.name, candidate.version),
        Mode.UNARY,
        Kind.VERSION,
    )
    try:
        for step in env.pipeline.plan(probe).head:
            if step.resolving:
                await step.run(env, probe)
    except (NotFound, Forbidden):
        return False
    return True
