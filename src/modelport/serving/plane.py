"""The serving plane as the surfaces see it: control (endpoints, deployments), routing,
and idempotency, built once by the composition root.

``async with plane.running():`` starts the controller on the serving event loop
(the application's lifespan does this) and stops it, with its shadow copies, at
the end.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio.to_thread

from modelport.background.loops import BackgroundTask
from modelport.observability.serving_metrics import ServingMetrics
from modelport.serving.endpoints.controller import Controller
from modelport.serving.endpoints.service import EndpointService
from modelport.serving.endpoints.types import DegradePolicy, Deployment, DeploymentSpec, Endpoint
from modelport.serving.idempotency import IdempotencyStore
from modelport.serving.routing.router import Router
from modelport.serving.routing.table import Route

if TYPE_CHECKING:
    from modelport.serving.backends.catalog import BackendCatalog

log = logging.getLogger(__name__)


@dataclass
class ServingPlane:
    endpoints: EndpointService
    router: Router
    controller: Controller
    idempotency: IdempotencyStore
    metrics: ServingMetrics | None = None
    """The serving layer's collectors (on the runtime's registry), for anything else of
    the serving layer to reuse."""

    purge_seconds: float = 600.0
    """How often expired idempotency keys are removed."""

    backends: BackendCatalog | None = None
    """Declared remote backends that deployments may run versions on."""

    @asynccontextmanager
    async def running(self) -> AsyncIterator[ServingPlane]:
        if self.backends is not None:
            await anyio.to_thread.run_sync(self.backends.load)
        await self.controller.start()
        purging = BackgroundTask(
            "idempotency-purge",
            self._purge,
            self.purge_seconds,
            first_after=self.purge_seconds,
            failure="could not remove expired idempotency keys",
        )
        purging.start()
        try:
            yield self
        finally:
            # The database may be away for a while: a failed purge is logged and retried.
            await purging.stop()
            await self.controller.stop()
            if self.backends is not None:
                await self.backends.close()

    async def _purge(self) -> None:
        await anyio.to_thread.run_sync(self.idempotency.purge)

    async def route(self, endpoint: str) -> Route:
        """The endpoint's route from the snapshot. One not seen yet (made by another
        process), or one with no active deployment (its first may have just been
        activated), is read from the database (NotFound ``endpoint_not_found``)."""
        found = self.router.table.find(endpoint)
        if found is not None and found.deployment is not None:
            return found
        route = await anyio.to_thread.run_sync(self.endpoints.route, endpoint)
        self.router.install(route)
        return self.router.route(endpoint)

    async def create_endpoint(self, tenant: str, name: str, **fields: Any) -> Endpoint:
        """Create an endpoint (see ``EndpointService.create_endpoint``) and route to it."""
        endpoint = await anyio.to_thread.run_sync(
            lambda: self.endpoints.create_endpoint(tenant, name, **fields)
        )
        self.router.install(await anyio.to_thread.run_sync(self.endpoints.route, name))
        return endpoint

    async def set_degradation(self, name: str, policy: DegradePolicy | None) -> Endpoint:
        """Replace the endpoint's degradation policy (``EndpointService.set_degradation``)
        and route by it here at once (other processes rebuild on the change)."""
        endpoint = await anyio.to_thread.run_sync(self.endpoints.set_degradation, name, policy)
        self.router.install(await anyio.to_thread.run_sync(self.endpoints.route, name))
        return endpoint

    async def deploy(self, endpoint: str, spec: DeploymentSpec, *, actor: str) -> Deployment:
        """Validate and record a deployment, then start rolling it out (returns at once)."""
        deployment = await anyio.to_thread.run_sync(
            lambda: self.endpoints.create_deployment(endpoint, spec, actor=actor)
        )
        self.controller.submit(deployment)
        return deployment

    async def rollback(self, endpoint: str, deployment: int) -> Deployment:
        return await self.controller.rollback(endpoint, deployment)
