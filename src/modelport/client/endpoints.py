"""Endpoints and their deployments: create, read, deploy (a traffic split or a canary),
follow a rollout, roll back."""

from __future__ import annotations

import asyncio
import builtins
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from modelport.client.errors import InvalidReference
from modelport.client.family import AsyncFamily, Family
from modelport.client.transport import Call, segment
from modelport.client.types import Deployment, Endpoint, Rollback, items_of

PENDING = "pending"


@dataclass(frozen=True)
class Canary:
    """A canary rollout: the candidate's share moves through ``steps`` while its error
    rate and latency stay within the margins (None: the server's default)."""

    steps: Sequence[int] | None = None
    interval_seconds: float | None = None
    check_seconds: float | None = None
    min_requests: int | None = None
    max_error_rate_increase: float | None = None
    max_p99_increase: float | None = None
    latency_slack_ms: float | None = None

    def json(self) -> dict[str, Any]:
        body = {k: v for k, v in asdict(self).items() if v is not None}
        if "steps" in body:
            body["steps"] = list(body["steps"])
        return {"policy": "canary", **body}


def deployment_body(
    versions: Sequence[str],
    *,
    weights: Sequence[int] | None = None,
    canary: Canary | None = None,
    shadow: str | None = None,
    backends: Sequence[str] = ("local",),
) -> dict[str, Any]:
    """The body of a new deployment: ``versions`` (``owner/name:V``), the stable first.
    Without a canary, ``weights`` split the traffic (one version alone takes it all)."""
    if not versions:
        raise ValueError("a deployment needs at least one version")
    if canary is None and weights is None:
        if len(versions) > 1:
            raise ValueError("give the weights of the versions (they add up to 100) or a canary")
        weights = [100]
    if weights is not None and len(weights) != len(versions):
        raise ValueError(f"{len(versions)} versions but {len(weights)} weights")
    items = []
    for index, ref in enumerate(versions):
        model, version = _ref(ref)
        item: dict[str, Any] = {"model": model, "version": version, "backends": list(backends)}
        if weights is not None and canary is None:
            item["weight"] = weights[index]
        items.append(item)
    body: dict[str, Any] = {"versions": items}
    if canary is not None:
        body["rollout"] = canary.json()
    if shadow is not None:
        model, version = _ref(shadow)
        body["shadow"] = {"model": model, "version": version}
    return body


def _ref(ref: str) -> tuple[str, str]:
    model, _, version = ref.partition(":")
    if "/" not in model or not version:
        raise InvalidReference(f"expected owner/name:version, got {ref!r}")
    return model, version


def _path(name: str) -> str:
    return f"/api/endpoints/{segment(name)}"


def create_call(
    name: str, *, tenant: str | None = None, deadline_ms: int | None = None, description: str = ""
) -> Call[Endpoint]:
    body: dict[str, Any] = {"name": name, "tenant": tenant, "description": description}
    if deadline_ms is not None:
        body["deadline_ms"] = deadline_ms
    return Call("POST", "/api/endpoints", Endpoint.from_json, json=body)


def list_call(tenant: str | None = None) -> Call[list[Endpoint]]:
    return Call("GET", "/api/endpoints", items_of(Endpoint.from_json), params={"tenant": tenant})


def get_call(name: str) -> Call[Endpoint]:
    return Call("GET", _path(name), Endpoint.from_json)


def deploy_call(name: str, body: dict[str, Any]) -> Call[Deployment]:
    return Call("POST", f"{_path(name)}/deployments", Deployment.from_json, json=body)


def deployments_call(name: str) -> Call[list[Deployment]]:
    return Call("GET", f"{_path(name)}/deployments", items_of(Deployment.from_json))


def deployment_call(name: str, deployment: int) -> Call[Deployment]:
    return Call("GET", f"{_path(name)}/deployments/{deployment}", Deployment.from_json)


def rollback_call(name: str, deployment: int) -> Call[Rollback]:
    return Call("POST", f"{_path(name)}/deployments/{deployment}:rollback", Rollback.from_json)


class Endpoints(Family):
    """``client.endpoints``: endpoints are named; a deployment is a number within one."""

    def create(
        self,
        name: str,
        *,
        tenant: str | None = None,
        deadline_ms: int | None = None,
        description: str = "",
    ) -> Endpoint:
        """A new endpoint in the caller's tenant (the platform admin names ``tenant``)."""
        call = create_call(name, tenant=tenant, deadline_ms=deadline_ms, description=description)
        return self._t.run(call)

    def list(self, tenant: str | None = None) -> list[Endpoint]:
        return self._t.run(list_call(tenant))

    def get(self, name: str) -> Endpoint:
        """The endpoint, its schema and where its traffic goes."""
        return self._t.run(get_call(name))

    def deploy(
        self,
        name: str,
        versions: Sequence[str],
        *,
        weights: Sequence[int] | None = None,
        canary: Canary | None = None,
        shadow: str | None = None,
        backends: Sequence[str] = ("local",),
    ) -> Deployment:
        """Start a deployment (see ``deployment_body``); it rolls out in the background:
        ``wait`` follows it."""
        body = deployment_body(
            versions, weights=weights, canary=canary, shadow=shadow, backends=backends
        )
        return self._t.run(deploy_call(name, body))

    def deployments(self, name: str) -> builtins.list[Deployment]:
        """Deployments of the endpoint, newest first."""
        return self._t.run(deployments_call(name))

    def deployment(self, name: str, deployment: int) -> Deployment:
        return self._t.run(deployment_call(name, deployment))

    def wait(
        self, name: str, deployment: int, *, timeout: float = 300.0, interval: float = 0.25
    ) -> Deployment:
        """Poll until the deployment is no longer pending (active, or failed: see
        ``cause``); ``TimeoutError`` after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            current = self.deployment(name, deployment)
            if current.state != PENDING:
                return current
            if time.monotonic() > deadline:
                raise TimeoutError(f"deployment {deployment} of {name} still pending")
            time.sleep(interval)

    def rollback(self, name: str, deployment: int) -> Rollback:
        """Restore the deployment the active one (``deployment``) replaced."""
        return self._t.run(rollback_call(name, deployment))


class AsyncEndpoints(AsyncFamily):
    async def create(
        self,
        name: str,
        *,
        tenant: str | None = None,
        deadline_ms: int | None = None,
        description: str = "",
    ) -> Endpoint:
        call = create_call(name, tenant=tenant, deadline_ms=deadline_ms, description=description)
        return await self._t.run(call)

    async def list(self, tenant: str | None = None) -> list[Endpoint]:
        return await self._t.run(list_call(tenant))

    async def get(self, name: str) -> Endpoint:
        return await self._t.run(get_call(name))

    async def deploy(
        self,
        name: str,
        versions: Sequence[str],
        *,
        weights: Sequence[int] | None = None,
        canary: Canary | None = None,
        shadow: str | None = None,
        backends: Sequence[str] = ("local",),
    ) -> Deployment:
        body = deployment_body(
            versions, weights=weights, canary=canary, shadow=shadow, backends=backends
        )
        return await self._t.run(deploy_call(name, body))

    async def deployments(self, name: str) -> builtins.list[Deployment]:
        return await self._t.run(deployments_call(name))

    async def deployment(self, name: str, deployment: int) -> Deployment:
        return await self._t.run(deployment_call(name, deployment))

    async def wait(
        self, name: str, deployment: int, *, timeout: float = 300.0, interval: float = 0.25
    ) -> Deployment:
        deadline = time.monotonic() + timeout
        while True:
            current = await self.deployment(name, deployment)
            if current.state != PENDING:
                return current
            if time.monotonic() > deadline:
                raise TimeoutError(f"deployment {deployment} of {name} still pending")
            await asyncio.sleep(interval)

    async def rollback(self, name: str, deployment: int) -> Rollback:
        return await self._t.run(rollback_call(name, deployment))
