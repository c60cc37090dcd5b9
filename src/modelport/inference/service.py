"""The inference use case, for every surface: ``/v2`` infer, endpoint ``:predict``, and
later ``/v1``, gRPC and jobs. A surface parses, calls the service, and encodes.

A call, given who calls (``Caller``), what (``ModelTarget`` or ``EndpointTarget``) and
the surface's ``Decoder``:

1. resolve: the version (``VersionTargets``, cached) or the endpoint's route (the
   routing snapshot); check access (``inference.access``) and, for a version of
   another tenant, its callable state;
2. admit: rate, concurrency and budget limits (``inference.admission.admit``, the one
   admission step of every call, streams included: ``LimitService``, warm subjects
   without a thread hop, Redis admissions grouped); the rate decision is left on the
   ``Caller`` for the surface's ``RateLimit-*`` headers;
3. decode the request against the target's declared tensors (the surface's work);
4. for a version declared deterministic, look the question up in the response cache
   (``inference.cache``; a tenant that declared no-cache skips it); reserve: the meter
   prices the call (a hit by the ``cache_hit`` rule where there is one) and holds its
   upper cost (reservations grouped; settlements through the journal where there is one);
5. a hit is answered from the cache; otherwise dispatch through the serving layer
   (``Dispatcher``: breakers, health, retries, metrics; for an endpoint the router's
   canary, shadow and fallbacks) to a backend (this process's model host is the
   ``LocalBackend``);
6. record: usage quantities (``Usage``) on the metered call, the prediction log for an
   endpoint; settle, store a miss's answer in the cache, release the admission, and
   return the ``InferenceResult``.

A call is cancellable: the surface's watch cancels the task when its caller hangs up;
the meter then settles it ``cancelled`` and the admission is given back. The watch is
stopped once the backend answered (``Caller.watch``): from there the call is billed as
answered, whoever reads it.

Where the caller's tenant has a moderation policy for synchronous calls
(``inference.moderation``), the decoded inputs are moderated before step 4 (blocked:
nothing is reserved) and the outputs after step 6 (blocked: withheld, billed as
answered); a stream's prompt before it is admitted, its output chunk by chunk.

A generative call is ``stream``: the same resolution and access checks as
``call_model`` (or, for an endpoint, as ``call_endpoint``, its stream routed by
``Router.streams``), then ``inference.streaming`` (admitted by the same step as every
call, its token bound charged too; the upper bound held, drawn from the caller's hold
where it names one; the backend's stream of chunks; settle what was delivered).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime

import anyio
import anyio.to_thread
import numpy as np

from modelport.errors import ModelportError
from modelport.inference.access import (
    require_callable_state,
    require_endpoint,
    require_files_usable,
    require_model,
)
from modelport.inference.access_facts import AccessFacts
from modelport.inference.admission import admit
from modelport.inference.cache import ResponseCache
from modelport.inference.moderation import (
    StreamOutputCheck,
    SyncModeration,
    prompt_texts,
    texts_of,
)
from modelport.inference.records import prediction_record
from modelport.inference.streaming import CallStream, GenerateRequest, StreamingCalls, StreamTarget
from modelport.inference.targets import Target as Resolved
from modelport.inference.targets import VersionTargets
from modelport.inference.tokens import counts_tokens, input_token_bound, input_tokens, with_tokens
from modelport.inference.types import (
    Caller,
    Decoder,
    EndpointTarget,
    InferenceRequest,
    InferenceResult,
    ModelTarget,
    Replayed,
    Target,
    Usage,
)
from modelport.manifest import TensorSpec
from modelport.metering.meter import InferenceMeter
from modelport.metering.types import CallInfo, Unit
from modelport.moderation.types import Policy, Stage
from modelport.observability.predictions import PredictionLog
from modelport.runtime.types import Priority
from modelport.serving.backends.base import Backend
from modelport.serving.capability import request_rows, require_rows_fit
from modelport.serving.idempotency import Claim, Replay
from modelport.serving.plane import ServingPlane
from modelport.serving.routing.interface import Dispatcher
from modelport.serving.routing.router import Plan, Prediction
from modelport.serving.routing.streams import prompt_tensor, texts_tensor
from modelport.serving.routing.table import Route
from modelport.serving.types import BackendRequest, Provenance, Served, VersionRef
from modelport.tenancy.limits import Admission, LimitService
from modelport.tenancy.policy import Permission
from modelport.tenancy.types import Principal

Encoder = Callable[[InferenceResult], bytes]
"""The surface's encoding of an answer, for the service to keep under an idempotency key."""


class InferenceService:
    """Runs inference calls end to end (see the module docstring). One per process."""

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
    ) -> None:
        self.targets = targets
        self.facts = facts
        self.limits = limits
        self.meter = meter
        self.serving = serving
        self.dispatcher = dispatcher
        self.replicas_for = replicas_for
        self.prediction_log = prediction_log
        self.default_timeout_seconds = default_timeout_seconds
        self.moderation: SyncModeration | None = None
        """Set by the composition root where content moderation is wired."""
        self.cache: ResponseCache | None = None
        """The response cache, set by the composition root where it is enabled."""

    async def _policy(self, caller: Caller) -> Policy | None:
        """The caller's tenant's moderation policy for synchronous calls, if any."""
        if self.moderation is None:
            return None
        return await self.moderation.policy(caller)

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
        route = await self.serving.route(endpoint)
        caller.about = route.endpoint.tenant
        require_endpoint(caller.principal, route.endpoint, permission)
        return route

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
            versions = [(await self._callable(caller, target)).ref]
        calls = [
            CallInfo(
                tenant=principal.tenant or principal.id,
                key_id=principal.key_id,
                model=version.model,
                version=version.version,
                manifest_digest=version.manifest_digest,
                timeout_seconds=timeout,
            )
            for version in versions
        ]
        costs = [await anyio.to_thread.run_sync(self.meter.upper_cost, call) for call in calls]
        return max(costs, default=0)

    # ---- calls
    async def infer(
        self, caller: Caller, target: Target, decode: Decoder, *, encode: Encoder | None = None
    ) -> InferenceResult | Replayed:
        """One call of ``target`` (see the module docstring)."""
        if isinstance(target, ModelTarget):
            return await self.call_model(caller, target, decode)
        return await self.call_endpoint(caller, target, decode, encode=encode)

    async def stream(
        self, caller: Caller, target: Target, request: GenerateRequest, deadline: float
    ) -> CallStream:
        """A generative call as a metered stream of chunks: admitted, its upper bound
        held before the first chunk, settled at the stream's end, its deadline or its
        caller leaving (``StreamingCalls``, see ``inference.streaming``). ``deadline`` is
        an absolute ``time.monotonic()``.

        A registry version (``ModelTarget``) is resolved, its access and callable state
        checked as for ``call_model``, and streamed from its backend. An endpoint
        (``EndpointTarget``) streams as ``call_endpoint`` calls: its active deployment
        chooses the version (weights, or sticky by ``request.subject``), within the
        endpoint's deadline, through its replicas, breakers and fallback chain up to the
        first chunk, with its shadow copy, canary window and prediction log."""
        if isinstance(target, EndpointTarget):
            return await self._stream_endpoint(caller, target, request, deadline)
        resolved = await self._callable(caller, target)
        key = resolved.key
        check = await self._moderate_prompt(caller, request, key.model, key.version)
        backend = self.replicas_for(resolved.ref)[0]
        calls = StreamingCalls(backend=backend, meter=self.meter, limits=self.limits)
        return await calls.stream(
            caller,
            StreamTarget(resolved.ref, task_of(resolved.ref)),
            request,
            deadline,
            check=check,
        )

    async def _moderate_prompt(
        self, caller: Caller, request: GenerateRequest, model: str, version: str
    ) -> StreamOutputCheck | None:
        """Moderate a stream's prompt (``content_blocked`` before anything is held) and
        answer the check of its output, where the caller's policy says so."""
        policy = await self._policy(caller)
        if policy is None or self.moderation is None:
            return None
        texts = prompt_texts(request)
        await self.moderation.check(policy, caller, Stage.INPUT, texts, model, version)
        return self.moderation.stream_check(policy, caller, model, version)

    async def _stream_endpoint(
        self, caller: Caller, target: EndpointTarget, request: GenerateRequest, deadline: float
    ) -> CallStream:
        route = await self.route(caller, target.name, Permission.MODEL_CALL)
        route.check_active()
        endpoint = route.endpoint
        deadline = min(deadline, time.monotonic() + endpoint.deadline_ms / 1000)
        router = self.serving.router
        plan = router.plan(endpoint.name, request.subject)
        chosen = plan.version
        owner, _, name = chosen.model.partition("/")
        version = self.targets.cached(owner, name, chosen.version)
        if version is None:
            version = await self.targets.target(owner, name, chosen.version)
        if version.borrowed:  # its publisher mounted files: still its to use (as for /v2)
            await require_files_usable(self.facts, version)
        check = await self._moderate_prompt(caller, request, chosen.model, chosen.version)
        source = router.streams(plan)
        received_at = datetime.now(UTC)
        started = time.perf_counter()
        inputs = prompt_tensor(request.prompt, request.messages)

        def ended(stream: CallStream | None, exc: BaseException | None) -> None:
            if stream is None:
                return  # refused before it had a prediction id: nothing ran
            if isinstance(exc, ModelportError):
                status = exc.code
            elif exc is not None:
                status = "cancelled"
            else:
                status = "ok"
            self.prediction_log.record(
                prediction_record(
                    prediction_id=stream.prediction_id,
                    endpoint=endpoint.name,
                    owner=endpoint.tenant,
                    chosen=chosen,
                    provenance=source.provenance,
                    inputs=inputs,
                    outputs=texts_tensor(source.texts) if source.provenance else None,
                    received_at=received_at,
                    latency_seconds=time.perf_counter() - started,
                    stages={},
                    tenant=caller.principal.tenant,
                    key_id=caller.principal.key_id,
                    request_id=caller.request_id,
                    status=status,
                    arm=plan.arm,
                    policy=endpoint.log_policy,
                )
            )

        calls = StreamingCalls(backend=source, meter=self.meter, limits=self.limits)
        return await calls.stream(
            caller,
            StreamTarget(chosen, task_of(chosen), endpoint=endpoint.name),
            request,
            deadline,
            on_end=ended,
            check=check,
        )

    async def _callable(self, caller: Caller, target: ModelTarget) -> Resolved:
        """The version ``target`` names, once the caller may call it: access (404 for
        a model it may not see) and the version's callable state."""
        principal = caller.principal
        owner = target.owner
        caller.about = owner
        await require_model(self.facts, principal, owner, target.name, Permission.MODEL_CALL)
        resolved = await self.targets.target(owner, target.name, target.version)
        require_callable_state(principal, owner, resolved)
        if resolved.borrowed:  # its publisher mounted files: still its to use?
            await require_files_usable(self.facts, resolved)
        return resolved

    async def call_model(
        self, caller: Caller, target: ModelTarget, decode: Decoder, *, moderate: bool = True
    ) -> InferenceResult:
        """Call a registry version directly (``/v2/models/owner/name[/versions/v]``);
        ``moderate`` False: not moderated (a moderation classifier's own call)."""
        principal = caller.principal
        resolved = await self._callable(caller, target)
        admission = await admit(self.limits, caller, resolved.model)
        try:
            manifest = resolved.manifest
            try:
                request = await decode(manifest.inputs, manifest.outputs)
            except ModelportError as exc:
                if exc.kind == "invalid":
                    resolved.observer.request_done("invalid", 0.0)
                raise
            # Larger than any replica takes: 413 before any work (not a 503 to retry).
            require_rows_fit(
                resolved.ref,
                request.inputs,
                (b.capabilities() for b in self.replicas_for(resolved.ref)),
            )
            timeout = request.timeout
            if timeout is None:
                timeout = self.default_timeout_seconds
            key = resolved.key
            policy = await self._policy(caller) if moderate else None
            if policy is not None:
                await self._moderate(
                    policy, caller, Stage.INPUT, request.inputs, key.model, key.version
                )
            meter = self.meter
            tokens = token_bound(manifest.inputs, manifest.outputs, request)
            lookup = None
            if self.cache is not None and manifest.deterministic:
                lookup = await self.cache.lookup(
                    principal.tenant,
                    principal.id,
                    key.manifest_digest,
                    request.inputs,
                    request.parameters,
                    request.outputs,
                )
            hit = None if lookup is None else lookup.hit
            call = await meter.open(  # its cost reserved (402 budget_exceeded)
                CallInfo(
                    tenant=principal.tenant or principal.id,
                    key_id=principal.key_id,
                    model=key.model,
                    version=key.version,
                    manifest_digest=key.manifest_digest,
                    request_id=caller.request_id,
                    timeout_seconds=timeout,
                    call_id=caller.call_id,
                    hold_id=caller.hold_id,
                    quantities={} if tokens is None else {Unit.INPUT_TOKEN: tokens},
                    cached=hit is not None,
                    rows=request_rows(resolved.ref, request.inputs),
                )
            )
            try:
                ref = resolved.ref
                started = time.perf_counter()
                if hit is not None and lookup is not None:
                    served = Served(
                        hit.outputs,
                        Provenance(ref, None, age_seconds=lookup.age_seconds, cached=True),
                    )
                else:
                    served = await self.dispatcher.dispatch(
                        BackendRequest(
                            ref,
                            request.inputs,
                            time.monotonic() + timeout,
                            request.priority or Priority.INTERACTIVE,
                            request.outputs if tokens is None else with_tokens(request.outputs),
                            request.parameters,
                            call.prediction_id,
                            call.reservation.id if call.reservation is not None else "",
                        ),
                        self.replicas_for(ref),
                    )
                if caller.watch is not None:
                    caller.watch.stop()  # answered: billed as such, whoever reads it
                usage = measure(request.inputs, served.timings, served.batch_size, started)
                outputs = served.outputs
                usage.rows = answered_rows(manifest.outputs, outputs, call.call.rows)
                if tokens is not None:
                    usage.input_tokens = input_tokens(outputs, tokens)
                    outputs = _asked(outputs, request.outputs)
                call.record_usage(usage)
            except BaseException as exc:
                await meter.failed(call, exc)  # cancelled: settled ``cancelled``
                raise
            await meter.succeeded(call)  # durable before the answer
            if lookup is not None and hit is None and self.cache is not None:
                await self.cache.store(lookup, served.outputs)  # as the model gave it
        finally:
            # Synchronous on purpose: it must run even when the call was cancelled.
            admission.release()
        if policy is not None:  # billed as answered: the model ran (or its answer was reused)
            await self._moderate(policy, caller, Stage.OUTPUT, outputs, key.model, key.version)
        return InferenceResult(
            outputs,
            resolved.model,
            resolved.version,
            usage,
            served.provenance,
            served.timings,
            served.batch_size,
            call.prediction_id,
            cache=None if lookup is None else ("miss" if hit is None else "hit"),
        )

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
        route = await self.route(caller, target.name, Permission.MODEL_CALL)
        route.check_active()
        request = await decode(route.inputs, route.outputs)
        timeout = route.endpoint.deadline_ms / 1000
        if request.timeout is not None:
            timeout = min(timeout, request.timeout)
        deadline = time.monotonic() + timeout
        if request.idempotency is None:
            return await self._run_endpoint(caller, route, request, timeout, deadline)
        principal = caller.principal
        idempotency = self.serving.idempotency
        key, fingerprint = request.idempotency
        claimed = await idempotency.claim(
            principal.tenant or principal.id,
            target.name,
            key,
            fingerprint,
            hold_seconds=timeout + 5.0,
            wait_until=deadline,
        )
        if isinstance(claimed, Replay):
            return Replayed(claimed.body, claimed.status)
        return await self._run_once(caller, route, request, timeout, deadline, claimed, encode)

    async def _run_once(
        self,
        caller: Caller,
        route: Route,
        request: InferenceRequest,
        timeout: float,
        deadline: float,
        claim: Claim,
        encode: Encoder | None,
    ) -> InferenceResult:
        idempotency = self.serving.idempotency
        try:
            result = await self._run_endpoint(caller, route, request, timeout, deadline)
            result.body = encode(result) if encode is not None else b""
        except BaseException:
            # Nothing was answered: a retry with the key runs again. Shielded, so that a
            # caller who went away (cancellation) still frees the key.
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(idempotency.release, claim)
            raise
        await anyio.to_thread.run_sync(idempotency.complete, claim, 200, result.body)
        return result

    async def _run_endpoint(
        self,
        caller: Caller,
        route: Route,
        request: InferenceRequest,
        timeout: float,
        deadline: float,
    ) -> InferenceResult:
        plan = self.serving.router.plan(route.endpoint.name, request.subject)
        self.serving.router.require_fits(plan, request.inputs)  # 413 before any work
        chosen = plan.version
        # The chosen version's files: still its publisher's to use (as for /v2).
        owner, _, name = chosen.model.partition("/")
        version = self.targets.cached(owner, name, chosen.version)
        if version is None:
            version = await self.targets.target(owner, name, chosen.version)
        if version.borrowed:
            await require_files_usable(self.facts, version)
        principal = caller.principal
        received_at = datetime.now(UTC)
        started = time.perf_counter()
        admission = await admit(self.limits, caller, chosen.model)
        try:
            policy = await self._policy(caller)
            if policy is not None:
                await self._moderate(
                    policy, caller, Stage.INPUT, request.inputs, chosen.model, chosen.version
                )
            meter = self.meter
            tokens = token_bound(route.inputs, route.outputs, request)
            call = await meter.open(
                CallInfo(
                    tenant=principal.tenant or principal.id,
                    key_id=principal.key_id,
                    model=chosen.model,
                    version=chosen.version,
                    manifest_digest=chosen.manifest_digest,
                    endpoint=route.endpoint.name,
                    request_id=caller.request_id,
                    timeout_seconds=timeout,
                    call_id=caller.call_id,
                    hold_id=caller.hold_id,
                    quantities={} if tokens is None else {Unit.INPUT_TOKEN: tokens},
                    rows=request_rows(chosen, request.inputs),
                )
            )
            try:
                try:
                    prediction = await self.serving.router.predict(
                        plan,
                        request.inputs,
                        deadline=deadline,
                        priority=request.priority,
                        outputs=request.outputs if tokens is None else with_tokens(request.outputs),
                        parameters=request.parameters,
                        prediction_id=call.prediction_id,
                        call_id=call.reservation.id if call.reservation is not None else "",
                    )
                    if caller.watch is not None:
                        caller.watch.stop()  # answered: billed as such, whoever reads it
                except ModelportError as exc:
                    self._log(
                        caller,
                        plan,
                        call.prediction_id,
                        request,
                        None,
                        received_at,
                        started,
                        exc.code,
                    )
                    raise
                ran = prediction.version
                if ran is not None and ran.ref != chosen.ref:
                    call.ran_version(ran.model, ran.version, ran.manifest_digest)
                usage = measure(request.inputs, prediction.timings, prediction.batch_size, started)
                usage.rows = answered_rows(route.outputs, prediction.outputs, call.call.rows)
                if tokens is not None:
                    usage.input_tokens = input_tokens(prediction.outputs, tokens)
                    prediction = replace(
                        prediction, outputs=_asked(prediction.outputs, request.outputs)
                    )
                call.record_usage(usage)
            except BaseException as exc:
                await meter.failed(call, exc)
                raise
            await meter.succeeded(call)
        finally:
            admission.release()
        self._log(caller, plan, prediction.id, request, prediction, received_at, started, "ok")
        if policy is not None:  # billed as answered: the model ran
            answered = "" if ran is None else ran.model
            await self._moderate(
                policy,
                caller,
                Stage.OUTPUT,
                prediction.outputs,
                answered,
                "" if ran is None else ran.version,
            )
        return InferenceResult(
            prediction.outputs,
            route.endpoint.name,
            "" if ran is None else ran.ref,
            usage,
            prediction.provenance,
            prediction.timings,
            prediction.batch_size,
            prediction.id,
            prediction,
        )

    # ---- steps
    async def _moderate(
        self,
        policy: Policy,
        caller: Caller,
        stage: Stage,
        tensors: Mapping[str, np.ndarray],
        model: str,
        version: str,
    ) -> None:
        """Moderate a tensor call's texts (its BYTES tensors); ``content_blocked``."""
        assert self.moderation is not None
        texts = texts_of(tensors)
        await self.moderation.check(policy, caller, stage, texts, model, version)

    async def admit(self, caller: Caller, model: str) -> Admission:
        """Rate → concurrency → budget for one call of ``model``: the admission step of
        every call (``inference.admission.admit``, which streams take too), its decision
        left on ``caller``; raises 429 ``rate_limited`` / ``concurrency_limited`` or 402
        ``budget_exceeded``. The caller must ``release`` the admission, whatever happens
        next."""
        return await admit(self.limits, caller, model)

    def _log(
        self,
        caller: Caller,
        plan: Plan,
        prediction_id: str,
        request: InferenceRequest,
        prediction: Prediction | None,
        received_at: datetime,
        started: float,
        status: str,
    ) -> None:
        """Queue the prediction-log record (never waits; a full log counts the drop)."""
        endpoint = plan.route.endpoint
        principal = caller.principal
        self.prediction_log.record(
            prediction_record(
                prediction_id=prediction_id,
                endpoint=endpoint.name,
                owner=endpoint.tenant,
                chosen=plan.version,
                provenance=None if prediction is None else prediction.provenance,
                inputs=request.inputs,
                outputs=None if prediction is None else prediction.outputs,
                received_at=received_at,
                latency_seconds=time.perf_counter() - started,
                stages={} if prediction is None else prediction.timings,
                tenant=principal.tenant,
                key_id=principal.key_id,
                request_id=caller.request_id,
                status=status,
                arm=plan.arm,
                policy=endpoint.log_policy,
            )
        )


def task_of(version: VersionRef) -> str:
    """The model's task as its manifest declares it (``runtime.task``), '' if not."""
    task = version.manifest.runtime.get("task")
    return str(task) if task else ""


def token_bound(
    inputs: Sequence[TensorSpec], outputs: Sequence[TensorSpec], request: InferenceRequest
) -> int | None:
    """For a model that counts its input tokens (``inference.tokens``: embeddings), the
    most the request's texts can make, held before it runs; None for any other."""
    if not counts_tokens(inputs, outputs):
        return None
    return input_token_bound(request.inputs)


def _asked(
    outputs: Mapping[str, np.ndarray], asked: tuple[str, ...] | None
) -> Mapping[str, np.ndarray]:
    """``outputs`` without the ``tokens`` the bill needed but the caller did not ask for."""
    if asked is None:
        return outputs
    return {name: array for name, array in outputs.items() if name in asked}


def answered_rows(
    specs: Sequence[TensorSpec], outputs: Mapping[str, np.ndarray], asked: int
) -> int:
    """The rows an answer holds (what ``row`` is charged for): dimension 0 of the outputs
    declared with a variable first dimension, never above the ``asked`` rows; ``asked``
    when no output is declared so (its answer is the whole request's)."""
    found = None
    for spec in specs:
        array = outputs.get(spec.name)
        if array is not None and spec.shape and spec.shape[0] == -1 and array.ndim:
            found = max(found or 0, int(array.shape[0]))
    return asked if found is None else min(found, asked)


def measure(
    inputs: Mapping[str, np.ndarray],
    timings: Mapping[str, float],
    batch_size: int | None,
    started: float,
) -> Usage:
    """What a tensor call used: its rows, its wall time since ``started``
    (``time.perf_counter``), and its rows' share of its batch's execution time as
    ``cpu_ms`` (the local host runs on CPU)."""
    first = next(iter(inputs.values()), None)
    rows = first.shape[0] if first is not None and first.ndim else 1
    execute = float(timings.get("execute", 0.0))
    batch = batch_size or 0
    share = execute * min(1.0, rows / batch) if batch > 0 else execute
    return Usage(rows=rows, seconds=time.perf_counter() - started, cpu_ms=share * 1000)
