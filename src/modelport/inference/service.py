"""The inference use case, for every surface: ``/v2`` infer, endpoint ``:predict``,
``/v1``, jobs. A surface parses, calls the service, and encodes.

Every call, unary or streamed, of a version or an endpoint, runs through one pipeline of
named steps (``inference.pipeline``)::

    resolve → authorize → read → degrade → admit → moderate → reserve → dispatch
            → record → settle → release → answer

each one function in its own module (``inference.steps``). The service's methods only
build the call's state (``inference.call.Call``: who calls, what, how) and run it.

A call is cancellable: the surface's watch cancels the task when its caller hangs up;
the meter then settles it ``cancelled`` and the admission is given back. The watch is
stopped once the backend answered (``Caller.watch``): from there the call is billed as
answered, whoever reads it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import anyio.to_thread
from opentelemetry.trace import Tracer

from modelport.clock import Clock, SystemClock
from modelport.errors import NotFound
from modelport.inference.access import require_model
from modelport.inference.access_facts import AccessFacts
from modelport.inference.admission import admit
from modelport.inference.cache import ResponseCache
from modelport.inference.call import Call, Encoder, Kind, Mode
from modelport.inference.degrade import Degradation
from modelport.inference.moderation import SyncModeration
from modelport.inference.pipeline import CallObserver, CostObserver, Pipeline
from modelport.inference.routed import TaskRouter
from modelport.inference.steps.reserve import call_info
from modelport.inference.steps.resolve import endpoint_route, task_of
from modelport.inference.streaming import CallStream, GenerateRequest
from modelport.inference.targets import VersionTargets
from modelport.inference.task_routes import NO_CANDIDATE, RouteTarget
from modelport.inference.types import (
    Caller,
    Decoder,
    EndpointTarget,
    InferenceResult,
    ModelTarget,
    Replayed,
    Target,
)
from modelport.metering.meter import InferenceMeter
from modelport.observability.predictions import PredictionLog
from modelport.observability.sampling import PredictionSampling
from modelport.serving.backends.base import Backend
from modelport.serving.plane import ServingPlane
from modelport.serving.routing.interface import Dispatcher
from modelport.serving.routing.table import Route
from modelport.serving.types import VersionRef
from modelport.tenancy.limits import Admission, LimitService
from modelport.tenancy.policy import Permission
from modelport.tenancy.types import Principal

__all__ = ["Encoder", "InferenceService", "task_of"]


class InferenceService:
    """Runs inference calls end to end through the pipeline (see the module docstring).
    One per process."""

    def __init__(
        self,
        *,
        targets: VersionTargets,
        facts: AccessFacts,
        limits: LimitService,
        meter: InferenceMeter,
        serving: ServingPlane,
        dispatcher: Dispatcher,
        replicas_for: Callable[[VersionRef], Sequence[Backend]],
        prediction_log: PredictionLog,
        default_timeout_seconds: float = 30.0,
        cache: ResponseCache | None = None,
        moderation: SyncModeration | None = None,
        tracer: Tracer | None = None,
        routes: TaskRouter | None = None,
        degradation: Degradation | None = None,
        clock: Clock | None = None,
        calls: CallObserver | None = None,
        costs: CostObserver | None = None,
        sampling: PredictionSampling | None = None,
    ) -> None:
        self.clock = clock or SystemClock()
        """What calls' deadlines are on (``modelport.clock``)."""
        self.targets = targets
        self.facts = facts
        self.limits = limits
        self.meter = meter
        self.serving = serving
        self.dispatcher = dispatcher
        self.replicas_for = replicas_for
        self.prediction_log = prediction_log
        self.default_timeout_seconds = default_timeout_seconds
        self.sampling = sampling
        """Which direct version calls the prediction log keeps (None: none)."""
        self.moderation = moderation
        """Tenants' content policies, where content moderation is wired."""
        self.cache = cache
        """The response cache, where it is enabled."""
        self.routes = routes
        """Routing by need (task aliases), where wired; None: ``route:`` names are 404."""
        self.degradation = degradation
        """Low-priority calls under load served by a fallback or shed, where wired."""
        self.pipeline = Pipeline(self, tracer=tracer)
        """Every call's steps, in their one order (each in a span with ``tracer``)."""
        self.pipeline.calls = calls
        self.pipeline.costs = costs

    # ---- the caches a change must reach
    def forget(self, owner: str, name: str) -> None:
        """``owner/name``'s aliases, versions or lifecycle states changed: the next call
        resolves it afresh. Safe from any thread."""
        self.targets.forget(owner, name)

    def forget_grants(self, tenant: str) -> None:
        """``tenant`` was given or lost a grant. Safe from any thread."""
        self.facts.forget_grants(tenant)

    # ---- access, for the surfaces' other model routes (metadata, readiness)
    async def require_model(
        self, principal: Principal, owner: str, name: str, permission: Permission
    ) -> None:
        """Raise unless ``principal`` may do ``permission`` on ``owner/name`` (404 where it
        may not see it)."""
        await require_model(self.facts, principal, owner, name, permission)

    async def route(self, caller: Caller, endpoint: str, permission: Permission) -> Route:
        """The endpoint's route, if the caller may do ``permission`` on it."""
        return await endpoint_route(self, caller, endpoint, permission)

    async def upper_cost(self, principal: Principal, target: Target, timeout: float) -> int:
        """The most one call of ``target`` by ``principal`` within ``timeout`` seconds
        (an endpoint's deadline, if shorter) can be charged: its reservation (an
        endpoint's: the dearest of the versions it may run). Counted units bounded by
        the request are not known here: tokens count nothing, rows one. 404 for a target the
        principal may not call."""
        caller = Caller(principal)
        if isinstance(target, EndpointTarget):
            route = await self.route(caller, target.name, Permission.MODEL_CALL)
            timeout = min(timeout, route.endpoint.deadline_ms / 1000)
            versions = [*route.versions, *route.fallbacks.values()]
        else:
            call = Call(caller, target, Mode.UNARY, Kind.VERSION)
            for step in self.pipeline.plan(call).head:
                if step.resolving:  # resolve, authorize: what the principal may call
                    await step.run(self, call)
            assert call.ref is not None
            versions = [call.ref]
        calls = [call_info(principal, version, timeout) for version in versions]
        costs = [await anyio.to_thread.run_sync(self.meter.upper_cost, c) for c in calls]
        return max(costs, default=0)

    # ---- calls
    async def infer(
        self,
        caller: Caller,
        target: Target | RouteTarget,
        decode: Decoder,
        *,
        encode: Encoder | None = None,
    ) -> InferenceResult | Replayed:
        """One call of ``target`` (see the module docstring). A task alias is routed
        (``inference.routed``): the answer names the version that served it."""
        if isinstance(target, RouteTarget):
            result, _ = await self._router().call(
                self, caller, target, lambda chosen: self.call_model(caller, chosen, decode)
            )
            return result
        if isinstance(target, ModelTarget):
            return await self.call_model(caller, target, decode)
        return await self.call_endpoint(caller, target, decode, encode=encode)

    async def call_model(
        self, caller: Caller, target: ModelTarget, decode: Decoder, *, moderate: bool = True
    ) -> InferenceResult:
        """Call a registry version directly (``/v2/models/owner/name[/versions/v]``);
        ``moderate`` False: not moderated (a moderation classifier's own call)."""
        call = Call(caller, target, Mode.UNARY, Kind.VERSION, decode=decode, moderated=moderate)
        await self.pipeline.run(call)
        assert call.result is not None
        return call.result

    async def call_endpoint(
        self,
        caller: Caller,
        target: EndpointTarget,
        decode: Decoder,
        *,
        encode: Encoder | None = None,
    ) -> InferenceResult | Replayed:
        """Call an endpoint: its active deployment chooses the version (weights, or sticky
        by ``subject``). With an idempotency key, the first answer is replayed (encoded by
        ``encode``) and a call that failed or was cancelled frees the key."""
        call = Call(caller, target, Mode.UNARY, Kind.ENDPOINT, decode=decode, encode=encode)
        await self.pipeline.run(call)
        if call.replayed is not None:
            return call.replayed
        assert call.result is not None
        return call.result

    async def stream(
        self,
        caller: Caller,
        target: Target | RouteTarget,
        request: GenerateRequest,
        deadline: float,
    ) -> CallStream:
        """A generative call as a metered stream of chunks: admitted, its upper bound
        held before the first chunk, settled at the stream's end, its deadline or its
        caller leaving (see ``inference.streaming``). ``deadline`` is an absolute
        ``monotonic()`` of ``clock``.

        A registry version (``ModelTarget``) is resolved, its access and callable state
        checked as for ``call_model``, and streamed from its backend. An endpoint
        (``EndpointTarget``) streams as ``call_endpoint`` calls: its active deployment
        chooses the version (weights, or sticky by ``request.subject``), within the
        endpoint's deadline, through its replicas, breakers and fallback chain up to the
        first chunk, with its shadow copy, canary window and prediction log. A task
        alias (``RouteTarget``) is routed: the candidates are tried up to a first chunk
        (``CallStream.served_by`` names the one that serves it)."""
        if isinstance(target, RouteTarget):
            stream, _ = await self._router().call(
                self, caller, target, lambda chosen: self.stream(caller, chosen, request, deadline)
            )
            return stream
        call = Call(
            caller, target, Mode.STREAM, Call.kind_of(target), generate=request, deadline=deadline
        )
        await self.pipeline.run(call)
        assert call.stream is not None
        return call.stream

    def _router(self) -> TaskRouter:
        if self.routes is None:
            raise NotFound("routing by task is not enabled here", code=NO_CANDIDATE)
        return self.routes

    async def admit(self, caller: Caller, model: str) -> Admission:
        """Rate → concurrency → budget for one call of ``model``: the admission step of
        every call (``inference.admission.admit``), its decision left on ``caller``;
        raises 429 ``rate_limited`` / ``concurrency_limited`` or 402
        ``budget_exceeded``. The caller must ``release`` the admission, whatever happens
        next."""
        return await admit(self.limits, caller, model)
