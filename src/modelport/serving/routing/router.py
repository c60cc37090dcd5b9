"""The router: endpoint → active deployment → version (weights or sticky hash) → dispatch.

Two calls per prediction, so the surface can charge limits for the model that
will run before it runs: ``plan`` chooses the version (no I/O, from the routing
snapshot), ``predict`` runs it through the dispatcher, records the outcome for
the canary judge, and offers a copy to the shadow version. A generative call is
streamed from ``streams(plan)`` instead, with the same routing rules.
"""

from __future__ import annotations

import dataclasses
import logging
import random
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from opentelemetry.trace import Tracer

from modelport.errors import InvalidInput, ModelportError
from modelport.runtime.types import Priority
from modelport.serving.answer_cache import AnswerCaches
from modelport.serving.backends.base import Backend
from modelport.serving.capability import require_rows_fit
from modelport.serving.endpoints.types import LOCAL_BACKEND
from modelport.serving.fallback import VersionOption, build_fallback
from modelport.serving.routing.interface import Dispatcher, ReplicaProvider
from modelport.serving.routing.shadow import ShadowResult, ShadowRunner
from modelport.serving.routing.stats import TrafficStats
from modelport.serving.routing.streams import PlannedStream
from modelport.serving.routing.table import Route, RoutingTable
from modelport.serving.types import BackendRequest, Provenance, VersionRef

log = logging.getLogger(__name__)

NOT_COUNTED = (InvalidInput,)
"""Errors that are the caller's doing: not held against the version that refused them."""


@dataclass(frozen=True)
class Plan:
    """A routing decision: the route as it was, and the version chosen from it."""

    route: Route
    version: VersionRef

    @property
    def endpoint(self) -> str:
        return self.route.endpoint.name

    @property
    def arm(self) -> str:
        """``stable`` for the deployment's first version, ``candidate`` for the others."""
        return "stable" if self.version == self.route.versions[0] else "candidate"


@dataclass(frozen=True)
class Prediction:
    id: str
    endpoint: str
    deployment: int
    chosen: VersionRef
    """The version routing chose."""
    outputs: Mapping[str, np.ndarray]
    provenance: Provenance
    """Which version and backend answered, and whether a fallback did."""
    seconds: float
    timings: Mapping[str, float]
    """Seconds per stage where the backend knows them: queue, batch_wait, execute."""
    batch_size: int | None = None
    """Rows in the batch this request ran in."""

    @property
    def version(self) -> VersionRef | None:
        """The version whose answer this is (None for a static fallback)."""
        return self.provenance.version


def new_prediction_id() -> str:
    return uuid.uuid4().hex


class Router:
    def __init__(
        self,
        dispatcher: Dispatcher,
        replicas_for: ReplicaProvider,
        *,
        caches: AnswerCaches | None = None,
        stats: TrafficStats | None = None,
        shadow_max_in_flight: int = 4,
        rng: random.Random | None = None,
        remotes: Callable[[str], Backend | None] | None = None,
        record_shadow: Callable[[ShadowResult], object] | None = None,
        tracer: Tracer | None = None,
    ) -> None:
        """``replicas_for`` gives a version's local replicas; ``remotes`` finds a declared
        remote backend by name (for versions a deployment runs on named backends);
        ``record_shadow`` receives every shadow result (e.g. to the prediction log);
        ``tracer``: each shadow copy in a span of its own."""
        self.dispatcher = dispatcher
        self.replicas_for = replicas_for
        self.remotes = remotes or (lambda name: None)
        self.caches = caches or AnswerCaches()
        self.stats = stats or TrafficStats()
        self.table = RoutingTable()
        self.shadow = ShadowRunner(
            dispatcher,
            self.stats,
            max_in_flight=shadow_max_in_flight,
            record=record_shadow,
            tracer=tracer,
        )
        self._rng = rng or random.Random()

    # ---- the snapshot
    def install(self, route: Route) -> None:
        """Swap in one endpoint's new route (built by the control plane)."""
        self.table.put(self._prepared(route))

    def install_all(self, routes: Mapping[str, Route]) -> None:
        self.table.replace_all({name: self._prepared(r) for name, r in routes.items()})

    def _prepared(self, route: Route) -> Route:
        """The route with its versions' replicas and its fallback chain made ready, so a
        request does no lookups."""
        if route.deployment is None:
            return route
        versions = [*route.versions, *([route.shadow] if route.shadow else [])]
        replicas = {v.ref: self._replicas(v, route.backends.get(v.ref)) for v in versions}
        chain = route.endpoint.fallback
        options: tuple[Any, ...] = ()
        if chain is not None and chain.steps:
            try:
                options = tuple(
                    build_fallback(
                        chain,
                        route.versions[0],
                        endpoint=route.endpoint.name,
                        resolve=lambda model, version: route.fallbacks[f"{model}:{version}"],
                        replicas_for=self.replicas_for,
                        caches=self.caches,
                    )
                )
            except (ModelportError, KeyError):
                # Checked when the deployment was made; never let it stop routing.
                log.exception("endpoint %s: fallback chain not usable", route.endpoint.name)
        return dataclasses.replace(route, replicas=replicas, fallback_options=options)

    def _replicas(self, version: VersionRef, names: Sequence[str] | None) -> Sequence[Backend]:
        """The version's backends in the deployment's order; a name no longer declared is
        skipped (the others still serve). Local replicas alone are kept as the provider
        gives them: the worker pool's is a live sequence."""
        if not names or tuple(names) == (LOCAL_BACKEND,):
            return self.replicas_for(version)
        found: list[Backend] = []
        for name in names or (LOCAL_BACKEND,):
            if name == LOCAL_BACKEND:
                found.extend(self.replicas_for(version))
            elif (remote := self.remotes(name)) is not None:
                found.append(remote)
        return tuple(found)

    def route(self, endpoint: str) -> Route:
        """The endpoint's route now (NotFound ``endpoint_not_found``)."""
        return self.table.get(endpoint)

    def plan(self, endpoint: str, subject: str | None = None) -> Plan:
        route = self.table.get(endpoint)
        return Plan(route, route.choose(subject, self._rng))

    def streams(self, plan: Plan) -> PlannedStream:
        """The stream source of one planned generative call: the planned version (or its
        fallbacks) streamed through the dispatcher, its outcome recorded for the canary
        judge and a copy offered to the shadow (``modelport.serving.routing.streams``)."""
        return PlannedStream(self, plan)

    def require_fits(self, plan: Plan, inputs: Mapping[str, np.ndarray]) -> None:
        """413 ``payload_too_large`` when no backend of the planned version, nor of a
        version its fallback chain would try, could take the request's rows
        (``capability.require_rows_fit``). A chain that may answer without a backend (a
        cache, a static answer) leaves the request to it."""
        route = plan.route
        replicas = list(route.replicas.get(plan.version.ref, ()))
        for option in route.fallback_options:
            if not isinstance(option, VersionOption):
                return
            replicas.extend(option.replicas)
        require_rows_fit(plan.version, inputs, (b.capabilities() for b in replicas))

    async def predict(
        self,
        plan: Plan,
        inputs: Mapping[str, np.ndarray],
        *,
        deadline: float,
        priority: Priority | None = None,
        outputs: Sequence[str] | None = None,
        parameters: Mapping[str, Any] | None = None,
        prediction_id: str | None = None,
        call_id: str = "",
    ) -> Prediction:
        """Run the planned version (or its fallbacks) by ``deadline`` (``time.monotonic``).
        ``call_id``: the metered call's id, which remote backends pass on."""
        route = plan.route
        assert route.deployment is not None
        request = BackendRequest(
            version=plan.version,
            inputs=inputs,
            deadline=deadline,
            priority=priority or route.endpoint.priority,
            outputs=tuple(outputs) if outputs else None,
            parameters=dict(parameters or {}),
            request_id=prediction_id or new_prediction_id(),
            call_id=call_id,
        )
        started = time.perf_counter()
        try:
            served = await self.dispatcher.dispatch(
                request,
                route.replicas.get(plan.version.ref, ()),
                fallback=route.fallback_options,
                endpoint=route.endpoint.name,
            )
        except ModelportError as exc:
            if not isinstance(exc, NOT_COUNTED):
                self.stats.record(
                    route.deployment, plan.version.ref, time.perf_counter() - started, ok=False
                )
            raise
        except Exception:
            self.stats.record(
                route.deployment, plan.version.ref, time.perf_counter() - started, ok=False
            )
            raise
        seconds = time.perf_counter() - started
        answered_by_chosen = served.provenance.fallback is None
        self.stats.record(route.deployment, plan.version.ref, seconds, ok=answered_by_chosen)
        if route.shadow is not None and answered_by_chosen:
            self.shadow.offer(
                route.endpoint,
                route.deployment,
                route.shadow,
                route.replicas.get(route.shadow.ref, ()),
                request,
                served.outputs,
                seconds,
                timeout=route.endpoint.deadline_ms / 1000,
            )
        return Prediction(
            id=request.request_id,
            endpoint=route.endpoint.name,
            deployment=route.deployment,
            chosen=plan.version,
            outputs=served.outputs,
            provenance=served.provenance,
            seconds=seconds,
            timings=served.timings,
            batch_size=served.batch_size,
        )

    async def close(self) -> None:
        await self.shadow.close()
