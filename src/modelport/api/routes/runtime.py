"""/api/runtime: what this process's model host holds, for the platform admin: each
hosted version's load state, queue depth, requests in flight, memory, and crashes or
quarantine of its worker processes; and each loaded generative version's engine
(``llama.cpp`` or ``transformers``), memory, and whether its model host ended. Read-only; loading and unloading are ``/v2``'s
repository calls."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from modelport.api import deps
from modelport.api.access import require_platform
from modelport.api.auth import CurrentPrincipal
from modelport.runtime.engines import GenerativeStatus
from modelport.runtime.types import VersionStatus
from modelport.tenancy.policy import Permission

router = APIRouter(tags=["runtime"])


def status_json(status: VersionStatus) -> dict[str, Any]:
    return {
        "model": status.key.model,
        "version": status.key.version,
        "manifest_digest": status.key.manifest_digest,
        "state": status.state.value,
        "pinned": status.pinned,
        "cause": status.cause,
        "cause_code": status.cause_code,
        "in_flight": status.in_flight,
        "queued": status.queued,
        "max_queue_size": status.batching.max_queue_size,
        "host_memory_bytes": status.host_memory_bytes,
        "device_memory_bytes": status.device_memory_bytes,
        "crashes": status.crashes,
        "quarantined_seconds": round(status.quarantined_seconds, 3),
    }


@router.get("/runtime/models")
def runtime_models(
    engines: deps.Engines, host: deps.Host, request: Request, principal: CurrentPrincipal
) -> dict[str, Any]:
    """Versions this process hosts, by ``owner/name:version``; ``hosts_models`` is false
    (and the list empty) in the ``gateway`` role, which runs versions on remote backends."""
    require_platform(request, principal, Permission.PLATFORM_MANAGE)
    if host is None:
        return {"hosts_models": False, "items": [], "generative": []}
    statuses = sorted(host.statuses(), key=lambda s: (s.key.model, s.key.version))
    generative = engines.statuses() if engines is not None else []
    return {
        "hosts_models": True,
        "items": [status_json(s) for s in statuses],
        "generative": [generative_json(s) for s in generative],
    }


def generative_json(status: GenerativeStatus) -> dict[str, Any]:
    return {
        "model": status.key.model,
        "version": status.key.version,
        "manifest_digest": status.key.manifest_digest,
        "engine": status.engine,
        "host_memory_bytes": status.memory_bytes,
        "ended": status.ended,
    }
