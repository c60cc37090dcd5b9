"""/api/endpoints: endpoints, their deployments, rollback.

An endpoint belongs to a tenant; another tenant gets 404 for it, exactly as for
one that does not exist. Reading needs ``model.read``, creating endpoints and
deployments and rolling back ``version.deploy`` (in the endpoint's tenant);
predicting (``modelport.api.routes.predict``) needs ``model.call``.
"""

from __future__ import annotations

from typing import Any, Literal

import anyio.to_thread
from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from modelport.api import deps
from modelport.api.access import note_tenant, require_tenant
from modelport.api.auth import CurrentPrincipal
from modelport.api.routes.serving_json import deployment_json, endpoint_json
from modelport.errors import InvalidInput
from modelport.inference import access
from modelport.observability.slo import MAX_SLOS, SLO
from modelport.observability.types import LogPolicy
from modelport.runtime.types import LoadState
from modelport.serving.endpoints.errors import endpoint_not_found
from modelport.serving.endpoints.spec import ENDPOINT_NAME_RE
from modelport.serving.endpoints.types import (
    CanaryPolicy,
    DeploymentSpec,
    DeploymentState,
    Endpoint,
    Resources,
    RolloutKind,
    RolloutPolicy,
    VersionProgress,
    VersionWeight,
)
from modelport.serving.plane import ServingPlane
from modelport.serving.types import FallbackChain
from modelport.tenancy.policy import Permission
from modelport.tenancy.types import Principal

router = APIRouter(tags=["endpoints"])
ENDPOINT_PATH = "/endpoints/{name}"
DEPLOYMENT_PATH = ENDPOINT_PATH + "/deployments/{deployment}"


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CreateEndpoint(_Body):
    name: str = Field(description="1-63 lowercase letters, digits and '-'; unique")
    tenant: str | None = Field(default=None, description="Default: the caller's tenant")
    deadline_ms: int = Field(default=30_000, description="Longest a prediction may take")
    priority: Literal["interactive", "batch", "offline"] = "interactive"
    description: str = Field(default="", max_length=10_000)
    fallback: FallbackChain | None = None
    log: LogPolicy | None = Field(
        default=None, description="What the prediction log keeps (default: audit fields only)"
    )
    slos: list[SLO] = Field(
        default=[], max_length=MAX_SLOS, description="Service level objectives (see /slos)"
    )


class VersionBody(_Body):
    model: str = Field(description="owner/name")
    version: str
    weight: int = Field(default=0, ge=0, le=100, description="Share of traffic (manual)")
    backends: list[str] = Field(
        default=["local"],
        min_length=1,
        max_length=8,
        description="Where it runs, in the order to try: 'local' and/or declared backends",
    )


class ShadowBody(_Body):
    model: str
    version: str


class ResourcesBody(_Body):
    min_replicas: int = Field(default=1, ge=0)
    max_replicas: int = Field(default=1, ge=1)
    memory_bytes: int | None = Field(default=None, gt=0)


class RolloutBody(_Body):
    policy: Literal["manual", "canary"] = "manual"
    steps: list[int] = Field(default=[5, 25, 50, 100], max_length=32)
    interval_seconds: float = Field(default=300.0, gt=0)
    check_seconds: float = Field(default=10.0, gt=0)
    min_requests: int = Field(default=20, ge=1)
    max_error_rate_increase: float = Field(default=0.05, ge=0, le=1)
    max_p99_increase: float = Field(default=0.5, ge=0)
    latency_slack_ms: float = Field(default=5.0, ge=0)


class CreateDeployment(_Body):
    versions: list[VersionBody] = Field(
        min_length=1, description="The stable version first, then the candidates"
    )
    shadow: ShadowBody | None = None
    resources: ResourcesBody = Field(default_factory=ResourcesBody)
    rollout: RolloutBody = Field(default_factory=RolloutBody)

    def spec(self) -> DeploymentSpec:
        rollout = self.rollout
        canary = None
        if rollout.policy == "canary":
            canary = CanaryPolicy(
                steps=tuple(rollout.steps),
                interval_seconds=rollout.interval_seconds,
                check_seconds=rollout.check_seconds,
                min_requests=rollout.min_requests,
                max_error_rate_increase=rollout.max_error_rate_increase,
                max_p99_increase=rollout.max_p99_increase,
                latency_slack_ms=rollout.latency_slack_ms,
            )
        return DeploymentSpec(
            versions=tuple(
                VersionWeight(v.model, v.version, v.weight, tuple(v.backends))
                for v in self.versions
            ),
            shadow=None
            if self.shadow is None
            else VersionWeight(self.shadow.model, self.shadow.version),
            resources=Resources(**self.resources.model_dump()),
            rollout=RolloutPolicy(RolloutKind(rollout.policy), canary),
        )


def serving(request: Request) -> ServingPlane:
    return deps.serving_service(request)


def require_endpoint(
    request: Request, principal: Principal, endpoint: Endpoint, permission: Permission
) -> None:
    """404 for a caller outside the endpoint's tenant, 403 for one without ``permission``."""
    note_tenant(request, endpoint.tenant)
    access.require_endpoint(principal, endpoint, permission)


def _endpoint(
    request: Request, principal: Principal, name: str, permission: Permission
) -> Endpoint:
    endpoint = serving(request).endpoints.get_endpoint(name)
    require_endpoint(request, principal, endpoint, permission)
    return endpoint


def readable_endpoint(request: Request, principal: Principal, name: str) -> Endpoint:
    """The endpoint ``name`` for a caller who may read it (its reports: outcomes,
    traffic); a string that cannot be a name is not found without a lookup."""
    if not ENDPOINT_NAME_RE.match(name):
        raise endpoint_not_found(name[:63])
    return _endpoint(request, principal, name, Permission.MODEL_READ)


@router.post("/endpoints", status_code=201)
async def create_endpoint(
    serving: deps.Serving,
    tenancy: deps.Tenancy,
    body: CreateEndpoint,
    request: Request,
    response: Response,
    principal: CurrentPrincipal,
) -> dict[str, Any]:
    """Create an endpoint in the caller's tenant (the platform admin names the tenant)."""
    tenant = body.tenant or principal.tenant
    if tenant is None:
        raise InvalidInput(
            "'tenant' is required for a caller without one", code="invalid_request", field="tenant"
        )
    require_tenant(request, principal, tenant, Permission.VERSION_DEPLOY)
    await anyio.to_thread.run_sync(tenancy.get_tenant, tenant)
    endpoint = await serving.create_endpoint(
        tenant,
        body.name,
        actor=principal.id,
        deadline_ms=body.deadline_ms,
        priority=body.priority,
        description=body.description,
        fallback=body.fallback,
        log_policy=body.log,
        slos=body.slos,
    )
    response.headers["Location"] = f"/api/endpoints/{endpoint.name}"
    return endpoint_json(endpoint)


@router.get("/endpoints")
def list_endpoints(
    request: Request, principal: CurrentPrincipal, tenant: str | None = None
) -> dict[str, Any]:
    """Endpoints of the caller's tenant (the platform admin: all, or ``tenant``'s)."""
    scope = tenant if principal.tenant is None else principal.tenant
    if scope is not None:
        require_tenant(request, principal, scope, Permission.MODEL_READ)
    plane = serving(request)
    return {
        "items": [
            endpoint_json(e, plane.router.table.find(e.name))
            for e in plane.endpoints.list_endpoints(scope)
        ]
    }


@router.get(ENDPOINT_PATH)
def get_endpoint(name: str, request: Request, principal: CurrentPrincipal) -> dict[str, Any]:
    """The endpoint, its schema (from the active deployment's stable version) and traffic."""
    endpoint = _endpoint(request, principal, name, Permission.MODEL_READ)
    return endpoint_json(endpoint, serving(request).router.table.find(name))


@router.post(ENDPOINT_PATH + "/deployments", status_code=202)
async def create_deployment(
    name: str,
    body: CreateDeployment,
    request: Request,
    response: Response,
    principal: CurrentPrincipal,
) -> dict[str, Any]:
    """Validate, then roll out asynchronously: the versions are fetched, loaded and warmed
    up, and traffic moves to them atomically once every one is ready. Poll the
    ``Location`` for progress."""
    plane = serving(request)
    endpoint = await anyio.to_thread.run_sync(plane.endpoints.get_endpoint, name)
    require_endpoint(request, principal, endpoint, Permission.VERSION_DEPLOY)
    deployment = await plane.deploy(name, body.spec(), actor=principal.id)
    response.headers["Location"] = f"/api/endpoints/{name}/deployments/{deployment.id}"
    return deployment_json(deployment)


@router.get(ENDPOINT_PATH + "/deployments")
def list_deployments(name: str, request: Request, principal: CurrentPrincipal) -> dict[str, Any]:
    """Deployments of the endpoint, newest first."""
    _endpoint(request, principal, name, Permission.MODEL_READ)
    plane = serving(request)
    return {"items": [_deployment_json(plane, d) for d in plane.endpoints.list_deployments(name)]}


@router.get(DEPLOYMENT_PATH)
def get_deployment(
    name: str, deployment: int, request: Request, principal: CurrentPrincipal
) -> dict[str, Any]:
    """A deployment: each version's fetch, verify, load and warm-up, readiness, weight and
    (in this process) traffic; the shadow's comparison; the rollout's progress."""
    _endpoint(request, principal, name, Permission.MODEL_READ)
    plane = serving(request)
    return _deployment_json(plane, plane.endpoints.get_deployment(name, deployment))


@router.post(DEPLOYMENT_PATH + ":rollback")
async def rollback(
    name: str, deployment: int, request: Request, principal: CurrentPrincipal
) -> dict[str, Any]:
    """Restore, at once, the deployment this active one replaced (while its rollback window
    is open: 409 ``rollback_window_closed`` after)."""
    plane = serving(request)
    endpoint = await anyio.to_thread.run_sync(plane.endpoints.get_endpoint, name)
    require_endpoint(request, principal, endpoint, Permission.VERSION_DEPLOY)
    rolled = await plane.rollback(name, deployment)
    restored = await anyio.to_thread.run_sync(plane.endpoints.get_endpoint, name)
    return {
        "rolled_back": _deployment_json(plane, rolled),
        "endpoint": endpoint_json(restored, plane.router.table.find(name)),
    }


def _deployment_json(plane: ServingPlane, deployment: Any) -> dict[str, Any]:
    placement = plane.controller.placement
    stats = plane.router.stats
    live = deployment.state is DeploymentState.PENDING

    def progress(recorded: VersionProgress) -> VersionProgress:
        # While loading, the host knows more than the database does.
        if not live or recorded.state in ("ready", "failed"):
            return recorded
        model, _, version = recorded.ref.rpartition(":")
        status = placement.lookup(model, version)
        if status is None or status.state is LoadState.UNLOADING:
            return recorded
        return VersionProgress(
            ref=recorded.ref,
            state=status.state.value,
            phases=dict(status.phases),
            cause=status.cause,
            memory_bytes=status.host_memory_bytes,
            warm_up=status.warm_up,
        )

    return deployment_json(
        deployment,
        progress=progress,
        traffic=lambda ref: stats.window(deployment.id, ref),
        shadow=lambda ref: stats.shadow(deployment.id, ref),
    )


def _include_predict() -> None:
    # Imported here: the predict module uses this one's ``require_endpoint``.
    from modelport.api.routes.predict import router as predict_router

    router.include_router(predict_router)


_include_predict()
