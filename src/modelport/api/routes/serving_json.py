"""JSON shapes of endpoints and deployments on ``/api`` (plain dicts; the routes stay thin)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from pydantic import BaseModel

from modelport.serving.endpoints.rollout import gates
from modelport.serving.endpoints.types import (
    Deployment,
    Endpoint,
    ShadowStats,
    Stats,
    VersionProgress,
)
from modelport.serving.routing.table import Route


def _time(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _dump(model: BaseModel | None) -> Any:
    return None if model is None else model.model_dump(mode="json")


def _tensors(specs: list[Any]) -> list[dict[str, Any]]:
    return [{"name": s.name, "datatype": s.datatype, "shape": list(s.shape)} for s in specs]


def endpoint_json(endpoint: Endpoint, route: Route | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": endpoint.name,
        "tenant": endpoint.tenant,
        "description": endpoint.description,
        "deadline_ms": endpoint.deadline_ms,
        "priority": endpoint.priority.value,
        "fallback": _dump(endpoint.fallback),
        "log": _dump(endpoint.log_policy),
        "slos": [s.model_dump(mode="json") for s in endpoint.slos],
        "active_deployment": endpoint.active_deployment,
        "previous_deployment": endpoint.previous_deployment,
        "rollback_until": _time(endpoint.rollback_until),
        "created_at": _time(endpoint.created_at),
        "created_by": endpoint.created_by,
        "schema": None,
        "traffic": [],
    }
    if route is not None and route.deployment is not None:
        body["schema"] = {"inputs": _tensors(route.inputs), "outputs": _tensors(route.outputs)}
        body["traffic"] = [
            {"model": v.model, "version": v.version, "weight": w}
            for v, w in zip(route.versions, route.weights, strict=True)
        ]
        if route.shadow is not None:
            body["shadow"] = {"model": route.shadow.model, "version": route.shadow.version}
    return body


def _stats_json(stats: Stats) -> dict[str, Any]:
    return {
        "requests": stats.requests,
        "errors": stats.errors,
        "error_rate": stats.error_rate,
        "latency_ms": {"p50": stats.p50 * 1000, "p99": stats.p99 * 1000},
    }


def _progress_json(progress: VersionProgress) -> dict[str, Any]:
    return {
        "state": progress.state,
        "phases": progress.phases,
        "warm_up": progress.warm_up,
        "memory_bytes": progress.memory_bytes,
        "cause": progress.cause,
    }


def _split(ref: str) -> dict[str, str]:
    model, _, version = ref.rpartition(":")
    return {"model": model, "version": version}


def deployment_json(
    deployment: Deployment,
    *,
    progress: Callable[[VersionProgress], VersionProgress] = lambda p: p,
    traffic: Callable[[str], Stats] | None = None,
    shadow: Callable[[str], tuple[ShadowStats, list[dict[str, Any]]]] | None = None,
) -> dict[str, Any]:
    """``progress`` refreshes a recorded version progress from the host where it is live;
    ``traffic`` and ``shadow`` give this process's stats of a version by ref (a canary's
    ``rollout.gates`` are the judge's tests on them: this step's traffic in this process)."""
    spec = deployment.spec
    by_ref = {p.ref: progress(p) for p in deployment.progress}
    versions = []
    for index, item in enumerate(spec.versions):
        entry: dict[str, Any] = {
            "model": item.model,
            "version": item.version,
            "role": "stable" if index == 0 else "candidate",
            "weight": deployment.weights[index] if index < len(deployment.weights) else 0,
            "requested_weight": item.weight,
            "backends": list(item.backends),
            **_progress_json(by_ref.get(item.ref, VersionProgress(item.ref, "pending"))),
        }
        if traffic is not None:
            entry["traffic"] = _stats_json(traffic(item.ref))
        versions.append(entry)
    shadow_body = None
    if spec.shadow is not None:
        ref = spec.shadow.ref
        shadow_body = {
            **_split(ref),
            **_progress_json(by_ref.get(ref, VersionProgress(ref, "pending"))),
        }
        if shadow is not None:
            stats, recent = shadow(ref)
            shadow_body["comparison"] = {**stats.as_dict(), "recent": recent}
    listed = {v.ref for v in spec.all_versions()}
    fallbacks = [
        {**_split(p.ref), **_progress_json(p)} for ref, p in by_ref.items() if ref not in listed
    ]
    rollout: dict[str, Any] = {
        "policy": spec.rollout.kind.value,
        "status": deployment.rollout.status.value,
        "step": deployment.rollout.step,
        "reason": deployment.rollout.reason,
        "since": _time(deployment.rollout.since),
    }
    if spec.rollout.canary is not None:
        canary = spec.rollout.canary
        if traffic is not None and len(spec.versions) == 2:
            stable, candidate = (traffic(v.ref) for v in spec.versions)
            rollout["gates"] = [
                {"name": g.name, "observed": g.observed, "limit": g.limit, "passing": g.passing}
                for g in gates(canary, stable, candidate)
            ]
        rollout.update(
            steps=list(canary.steps),
            interval_seconds=canary.interval_seconds,
            check_seconds=canary.check_seconds,
            min_requests=canary.min_requests,
            max_error_rate_increase=canary.max_error_rate_increase,
            max_p99_increase=canary.max_p99_increase,
            latency_slack_ms=canary.latency_slack_ms,
        )
    return {
        "id": deployment.id,
        "endpoint": deployment.endpoint,
        "state": deployment.state.value,
        "ready": all(p.state == "ready" for p in by_ref.values()),
        "cause": deployment.cause or None,
        "versions": versions,
        "shadow": shadow_body,
        "fallback_versions": fallbacks,
        "resources": {
            "min_replicas": spec.resources.min_replicas,
            "max_replicas": spec.resources.max_replicas,
            "memory_bytes": spec.resources.memory_bytes,
        },
        "rollout": rollout,
        "created_at": _time(deployment.created_at),
        "created_by": deployment.created_by,
        "activated_at": _time(deployment.activated_at),
        "ended_at": _time(deployment.ended_at),
    }
