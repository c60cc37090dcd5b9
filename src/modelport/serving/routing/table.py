"""The routing snapshot: what each endpoint serves now, as immutable data.

Routers read one ``RoutingTable`` per request and never the database. A change
(a deployment activated, a canary step, a rollback) builds a new ``Route`` and
swaps it in as one reference assignment, so a request sees either the old
route or the new one, never a mix.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from modelport.errors import Unavailable
from modelport.manifest import TensorSpec
from modelport.serving.backends.base import Backend
from modelport.serving.endpoints.errors import endpoint_not_found
from modelport.serving.endpoints.types import Endpoint
from modelport.serving.routing.traffic import cumulative, pick, subject_point
from modelport.serving.types import VersionRef


@dataclass(frozen=True)
class Route:
    """One endpoint's traffic: its active deployment's versions and their shares."""

    endpoint: Endpoint
    deployment: int | None
    """The active deployment; None when there is none yet."""
    versions: tuple[VersionRef, ...] = ()
    weights: tuple[int, ...] = ()
    shadow: VersionRef | None = None
    backends: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Backend names of each traffic version, by ref, in order (absent: ``local``)."""
    fallbacks: Mapping[str, VersionRef] = field(default_factory=dict)
    """Versions the endpoint's fallback chain names, by ``owner/name:version``."""
    replicas: Mapping[str, Sequence[Backend]] = field(default_factory=dict)
    """Backends of each version (traffic and shadow), by ref; set by the router."""
    fallback_options: tuple[Any, ...] = ()
    """The endpoint's fallback chain, ready to run (``serving.fallback`` options)."""
    bounds: tuple[float, ...] = field(init=False, default=())

    def __post_init__(self) -> None:
        if self.weights and sum(self.weights) > 0:
            object.__setattr__(self, "bounds", cumulative(self.weights))

    @property
    def inputs(self) -> list[TensorSpec]:
        """The endpoint's request schema: its stable version's inputs."""
        return self.versions[0].manifest.inputs if self.versions else []

    @property
    def outputs(self) -> list[TensorSpec]:
        return self.versions[0].manifest.outputs if self.versions else []

    def check_active(self) -> None:
        """Raise 503 ``no_active_deployment`` when the endpoint serves nothing yet."""
        if self.deployment is None or not self.bounds:
            raise Unavailable(
                f"endpoint {self.endpoint.name!r} has no active deployment",
                code="no_active_deployment",
                endpoint=self.endpoint.name,
            )

    def choose(self, subject: str | None, rng: random.Random | None = None) -> VersionRef:
        """The version for one request: by the subject's hash when given, else at random."""
        self.check_active()
        if subject is not None:
            point = subject_point(self.endpoint.name, subject)
        else:
            point = (rng or random).random()
        return self.versions[pick(self.bounds, point)]


class RoutingTable:
    """Routes by endpoint name; replaced or updated only by swapping whole routes."""

    def __init__(self, routes: Mapping[str, Route] | None = None) -> None:
        self._routes: Mapping[str, Route] = MappingProxyType(dict(routes or {}))

    def get(self, name: str) -> Route:
        route = self._routes.get(name)
        if route is None:
            raise endpoint_not_found(name)
        return route

    def find(self, name: str) -> Route | None:
        return self._routes.get(name)

    def names(self) -> list[str]:
        return list(self._routes)

    def replace_all(self, routes: Mapping[str, Route]) -> None:
        """Install a full rebuild, keeping any route that is newer than the rebuild's."""
        merged = {name: self._newer(route) for name, route in routes.items()}
        self._routes = MappingProxyType(merged)

    def put(self, route: Route) -> None:
        routes = dict(self._routes)
        routes[route.endpoint.name] = self._newer(route)
        self._routes = MappingProxyType(routes)

    def _newer(self, route: Route) -> Route:
        # Rebuilds read the database at different moments; never go back in revision.
        current = self._routes.get(route.endpoint.name)
        if current is not None and current.endpoint.revision > route.endpoint.revision:
            return current
        return route
