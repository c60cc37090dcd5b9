"""One pipeline of named steps for every inference call, whatever its target (a
registry version or an endpoint) and its mode (one answer or a stream).

The order is written once, here (``STEPS``)::

    resolve → authorize → read → degrade → admit → moderate → reserve → dispatch
            → record → settle → release → answer

Each step is one function in its own module (``inference.steps``). A step that does
not apply to a call's target or mode is left out of that call's plan by the pipeline
(``Step.kinds``, ``Step.modes``), never re-implemented: ``read`` and ``answer`` are a
unary call's (a stream's request comes parsed, its answer is the stream), and a stream
handed an already resolved version (``StreamingCalls``) skips ``resolve`` and
``authorize``.

A unary call runs its plan to the end. A stream's plan stops after ``dispatch``, which
hands the caller a ``CallStream``; its last steps (record, settle, release) run when the
stream ends (``finish``), whatever ends it.

When a step raises, the steps that began and hold something give it back, latest
first (``Step.undo``): a reservation is settled failed (``settle.settle_failed``), an
admission released (``release.release_on_failure``), an idempotency key freed
(``read.free_claim``). Each gives back only what the call still holds: what settle or
release already did is not undone, and a step that raised before taking anything has
nothing to give.

A ``calls`` observer (None by default; ``observability.slo_metrics.SLIMetrics``) is
told how each endpoint call ended and how long it took: its SLOs' events. A stream's
outcome is told when it ends.

An ``observer`` (None by default) hears each step's name before it runs: the seam the
tests watch the order through. With a ``tracer`` (tracing on), each step runs in a span
of its own name (but ``resolve``, ``read``, ``release`` and ``answer``, which only find
or move data), child of the call's span: the surface's server span (or a job stage's),
or an ``inference`` span the pipeline opens where the call has none. A stream's last
steps run under the same call span when it ends, which then carries the stream's time to
first token and its tokens. With no tracer the loop does no tracing work at all.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from time import perf_counter
from typing import Protocol

from opentelemetry import trace
from opentelemetry.trace import Span, Tracer

from modelport.clock import Clock
from modelport.inference.access_facts import AccessFacts
from modelport.inference.cache import ResponseCache
from modelport.inference.call import Call, Kind, Mode
from modelport.inference.degrade import Degradation
from modelport.inference.moderation import SyncModeration
from modelport.inference.steps import (
    admit,
    answer,
    authorize,
    degrade,
    dispatch,
    moderate,
    read,
    record,
    release,
    reserve,
    resolve,
    settle,
)
from modelport.inference.targets import VersionTargets
from modelport.metering.meter import InferenceMeter
from modelport.metering.types import Unit
from modelport.observability import tracing
from modelport.observability.predictions import PredictionLog
from modelport.observability.sampling import PredictionSampling
from modelport.observability.slo_metrics import OK, outcome_of
from modelport.serving.backends.base import Backend
from modelport.serving.plane import ServingPlane
from modelport.serving.routing.interface import Dispatcher
from modelport.serving.types import VersionRef
from modelport.tenancy.limits import LimitService


class Env(Protocol):
    """What the steps use: the services a call goes through (``InferenceService`` is
    one). ``moderation`` and ``cache`` are None where they are not wired."""

    @property
    def targets(self) -> VersionTargets: ...
    @property
    def facts(self) -> AccessFacts: ...
    @property
    def limits(self) -> LimitService: ...
    @property
    def meter(self) -> InferenceMeter: ...
    @property
    def serving(self) -> ServingPlane: ...
    @property
    def dispatcher(self) -> Dispatcher: ...
    @property
    def replicas_for(self) -> Callable[[VersionRef], Sequence[Backend]]: ...
    @property
    def prediction_log(self) -> PredictionLog: ...
    @property
    def sampling(self) -> PredictionSampling | None: ...
    @property
    def default_timeout_seconds(self) -> float: ...
    @property
    def moderation(self) -> SyncModeration | None: ...
    @property
    def cache(self) -> ResponseCache | None: ...
    @property
    def pipeline(self) -> Pipeline: ...
    @property
    def degradation(self) -> Degradation | None: ...
    @property
    def clock(self) -> Clock: ...


StepRun = Callable[[Env, Call], Awaitable[None]]
Undo = Callable[[Env, Call, BaseException], Awaitable[None]]
Observer = Callable[[Call, str], None]


class CallObserver(Protocol):
    """Told once per endpoint call, as it ends: ``outcome`` is ``slo_metrics``'s (``ok``,
    ``error``, ``rejected``), ``seconds`` its time from the pipeline's start."""

    def endpoint_call(self, endpoint: str, outcome: str, seconds: float) -> None: ...


class CostObserver(Protocol):
    """Told once per metered call, as it ends: its tenant, the model that ran, the
    compute measured for it and what it was charged (``cost_metrics.CostMetrics``)."""

    def call_metered(
        self, tenant: str, model: str, cpu_ms: float, gpu_ms: float, charged_micros: int
    ) -> None: ...


_BOTH_KINDS = frozenset(Kind)
_BOTH_MODES = frozenset(Mode)


@dataclass(frozen=True, slots=True)
class Step:
    """One named step: what it does, what gives back what it holds if a later step
    raises, and the calls it applies to."""

    name: str
    run: StepRun
    undo: Undo | None = None
    kinds: frozenset[Kind] = _BOTH_KINDS
    modes: frozenset[Mode] = _BOTH_MODES
    resolving: bool = False
    """Finds the target: skipped for a call handed a resolved version."""
    traced: bool = True
    """In a span of its own when tracing is on; False for the steps that only find or
    move data (their time is the call span's)."""
    nests: bool = False
    """Its span is made current while it runs, for the spans it leads to (replica
    attempts, the runtime's wait and execution, the shadow; a moderation classifier's
    call); the other steps' spans are only started and ended, which costs less."""


STEPS: tuple[Step, ...] = (
    Step("resolve", resolve.resolve, resolving=True, traced=False),
    Step("authorize", authorize.authorize, resolving=True),
    Step("read", read.read, undo=read.free_claim, traced=False),
    # A version's low-priority calls under load: to a fallback, or shed (before admission).
    Step("degrade", degrade.degrade, traced=False),
    Step("admit", admit.admit, undo=release.release_on_failure),
    # Current while it runs: a moderation classifier's own call joins its span.
    Step("moderate", moderate.moderate, nests=True),
    Step("reserve", reserve.reserve, undo=settle.settle_failed),
    Step("dispatch", dispatch.dispatch, nests=True),
    Step("record", record.record),
    Step("settle", settle.settle),
    Step("release", release.release, traced=False),
    Step("answer", answer.answer, modes=frozenset({Mode.UNARY}), traced=False),
)
"""The order of every call's steps: written here only."""

_STREAM_ENDS_AFTER = "dispatch"
"""A stream's plan stops here; the rest runs when the stream ends."""

PlanKey = tuple[Kind, Mode, bool]


@dataclass(frozen=True, slots=True)
class Plan:
    """The steps one kind of call runs: ``head`` at once, ``tail`` when a stream ends
    (empty for a unary call, whose head is the whole plan)."""

    head: tuple[Step, ...]
    tail: tuple[Step, ...]
    undo: tuple[Step, ...]
    """The head's steps that give back what they hold, latest first."""


def plan_of(steps: Sequence[Step], kind: Kind, mode: Mode, resolved: bool) -> Plan:
    """The steps of ``steps`` that apply to a call of ``kind`` in ``mode`` (``resolved``:
    handed its version), split where a stream hands over."""
    applied = [
        step
        for step in steps
        if kind in step.kinds and mode in step.modes and not (resolved and step.resolving)
    ]
    head: list[Step] = applied
    tail: list[Step] = []
    if mode is Mode.STREAM:
        cut = next(i for i, step in enumerate(applied) if step.name == _STREAM_ENDS_AFTER) + 1
        head, tail = applied[:cut], applied[cut:]
    undo = tuple(step for step in reversed(head) if step.undo is not None)
    return Plan(tuple(head), tuple(tail), undo)


class Pipeline:
    """Runs calls through ``steps`` (``STEPS``) over ``env``'s services."""

    def __init__(
        self, env: Env, steps: Sequence[Step] = STEPS, tracer: Tracer | None = None
    ) -> None:
        self.env = env
        self.steps = tuple(steps)
        self.observer: Observer | None = None
        """Told each step's name before it runs (tests)."""
        self.tracer = tracer
        """Spans for the call and each step (None: tracing is off)."""
        self.calls: CallObserver | None = None
        """Told how each endpoint call ended (None: nobody listens)."""
        self.costs: CostObserver | None = None
        """Told what each metered call used and was charged (None: nobody listens)."""
        self._plans: dict[PlanKey, Plan] = {}

    def plan(self, call: Call) -> Plan:
        """``call``'s steps, worked out once per kind of call."""
        key = (call.kind, call.mode, call.target is None)
        found = self._plans.get(key)
        if found is None:
            found = self._plans[key] = plan_of(self.steps, *key)
        return found

    async def run(self, call: Call) -> None:
        """Run ``call``'s steps (a stream's up to its hand-over); on a failure, give back
        what the steps that ran hold, then raise."""
        plan = self.plan(call)
        env, observer, tracer = self.env, self.observer, self.tracer
        if call.kind is Kind.ENDPOINT:
            call.began = perf_counter()
        if tracer is not None:
            _open_call_span(tracer, call)
            if not call.span.is_recording():  # type: ignore[union-attr]
                tracer = None  # sampled out: its steps' spans would be dropped anyway
        done = 0
        try:
            for step in plan.head:
                if observer is not None:
                    observer(call, step.name)
                if tracer is None or not step.traced:
                    await step.run(env, call)
                else:
                    await _traced_step(tracer, step, env, call)
                done += 1
                if call.replayed is not None:
                    break  # answered by the first answer under its idempotency key
        except BaseException as exc:
            # The step that raised may hold part of what it takes (read's idempotency key
            # once claimed): its undo runs too. Each undo gives back only what is held.
            begun = {step.name for step in plan.head[: done + 1]}
            try:
                await self._undo([s for s in plan.undo if s.name in begun], call, exc)
            finally:
                if tracer is not None:
                    _close_call_span(call, exc)
                self._tell(call, exc)
            raise
        whole = call.mode is Mode.UNARY or call.stream is None
        if tracer is not None:
            _annotate(call)
            if whole:
                _close_call_span(call, None)
        if whole:
            self._tell(call, None)

    async def finish(self, call: Call, ended: BaseException | None) -> None:
        """A stream ended (``ended``: what ended it, None when whole): its last steps.
        Should one raise, what the call still holds is given back all the same."""
        call.ended = ended
        env, observer, tracer = self.env, self.observer, self.tracer
        if call.span is None or not call.span.is_recording():
            tracer = None
        try:
            for step in self.plan(call).tail:
                if observer is not None:
                    observer(call, step.name)
                if tracer is None or not step.traced:
                    await step.run(env, call)
                else:
                    # Under the call's span, whichever task ends the stream.
                    await _traced_step(tracer, step, env, call)
        except BaseException as exc:
            try:
                await self._undo(list(self.plan(call).undo), call, exc)
            finally:
                if tracer is not None:
                    _close_call_span(call, exc)
                self._tell(call, exc)
            raise
        if tracer is not None:
            _annotate(call)
            _close_call_span(call, ended)
        self._tell(call, ended)

    def _tell(self, call: Call, exc: BaseException | None) -> None:
        """A call ended (``exc``: how it failed): tell ``costs`` what a metered one used
        and was charged, and ``calls`` how an endpoint call ended."""
        costs, metered = self.costs, call.metered
        if costs is not None and metered is not None and call.settled:
            usage = call.usage
            model = metered.ran[0] if metered.ran is not None else metered.call.model
            costs.call_metered(
                metered.call.tenant,
                model,
                usage.cpu_ms if usage is not None else metered.compute_ms,
                usage.gpu_ms if usage is not None else 0.0,
                metered.charged_micros,
            )
        calls, endpoint = self.calls, call.endpoint
        if calls is None or endpoint is None or call.kind is not Kind.ENDPOINT:
            return
        outcome = OK if exc is None else outcome_of(exc)
        calls.endpoint_call(endpoint, outcome, perf_counter() - call.began)

    async def _undo(self, steps: list[Step], call: Call, exc: BaseException) -> None:
        """Each step's ``undo``, latest first; one that raises does not stop the rest."""
        for index, step in enumerate(steps):
            assert step.undo is not None
            try:
                await step.undo(self.env, call, exc)
            except BaseException:
                await self._undo(steps[index + 1 :], call, exc)
                raise


async def _traced_step(tracer: Tracer, step: Step, env: Env, call: Call) -> None:
    """``step`` in a span of its name, child of the call's span."""
    if step.nests:
        with tracing.span_under(tracer, step.name, call.span):
            await step.run(env, call)
        return
    assert call.span is not None
    span = tracer.start_span(step.name, context=trace.set_span_in_context(call.span))
    try:
        await step.run(env, call)
    except BaseException as exc:
        span.record_exception(exc)
        span.set_status(trace.StatusCode.ERROR, type(exc).__name__)
        raise
    finally:
        span.end()


def _open_call_span(tracer: Tracer, call: Call) -> None:
    """The call's span: the current one (a surface's server span, a job stage's, sampled
    or not), or an ``inference`` span of the pipeline's own where there is none."""
    current = trace.get_current_span()
    if current.get_span_context().is_valid:
        call.span, call.owns_span = current, False
    else:
        call.span, call.owns_span = tracer.start_span("inference"), True
    if call.span.is_recording():
        call.span.set_attribute(tracing.REQUEST_ID, call.caller.request_id or "")


def _annotate(call: Call) -> None:
    """The call's ids (and a stream's first token and tokens) on its span."""
    span = call.span
    if span is None or not span.is_recording():
        return
    if call.caller.call_id is not None:
        span.set_attribute(tracing.CALL_ID, call.caller.call_id)
    if call.metered is not None:
        span.set_attribute(tracing.PREDICTION_ID, call.metered.prediction_id)
    if call.endpoint is not None:
        span.set_attribute(tracing.ENDPOINT, call.endpoint)
    if call.ref is not None:
        span.set_attribute(tracing.VERSION, f"{call.ref.model}/{call.ref.version}")
    stream = call.stream
    if stream is not None:
        first = stream.first_chunk_seconds
        if first is not None:
            span.set_attribute(tracing.FIRST_TOKEN_MS, round(first * 1000, 3))
        usage = stream.usage
        span.set_attribute(tracing.INPUT_TOKENS, usage[Unit.INPUT_TOKEN])
        span.set_attribute(tracing.OUTPUT_TOKENS, usage[Unit.OUTPUT_TOKEN])


def _close_call_span(call: Call, exc: BaseException | None) -> None:
    """End the call's span if the pipeline opened it (a surface's span is its own)."""
    span: Span | None = call.span
    if span is None or not call.owns_span:
        return
    call.owns_span = False
    if exc is not None:
        span.record_exception(exc)
        span.set_status(trace.StatusCode.ERROR, type(exc).__name__)
    span.end()
