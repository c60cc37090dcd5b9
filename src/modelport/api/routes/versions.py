"""/api/models/{owner}/{name}/versions: publish, lifecycle, validation, signatures, lineage."""

from __future__ import annotations

import base64
import binascii
from functools import partial
from typing import Annotated, Any

import anyio.to_thread
from fastapi import APIRouter, Header, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from modelport.api import deps
from modelport.api.access import (
    parent_filter,
    require_model,
    require_owner_tenant,
    require_transition,
    visible_lineage,
)
from modelport.api.auth import CurrentPrincipal
from modelport.api.openapi.problem import problem_response, problems
from modelport.api.routes.jobs import job_json
from modelport.api.routes.registry_json import (
    event_json,
    lineage_json,
    report_json,
    signature_json,
    version_json,
)
from modelport.errors import InvalidInput
from modelport.registry.types import LifecycleState
from modelport.tenancy.policy import Permission

router = APIRouter(tags=["versions"])
VERSION_PATH = "/models/{owner}/{name}/versions/{version}"


class PublishVersion(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: str
    manifest: dict[str, Any] = Field(description="See docs/manifest.schema.json")


class Transition(BaseModel):
    model_config = ConfigDict(extra="forbid")

    to: str
    reason: str = Field(default="", max_length=2000)


class ExternalSignature(BaseModel):
    model_config = ConfigDict(extra="forbid")

    public_key: str = Field(description="base64 of the raw 32-byte Ed25519 public key")
    signature: str = Field(description="base64 Ed25519 signature of the manifest digest string")
    signer: str


@router.get("/models/{owner}/{name}/versions")
def list_versions(
    registry: deps.Registry, owner: str, name: str, request: Request, principal: CurrentPrincipal
) -> dict[str, Any]:
    """Versions of a model, oldest first (without their manifests)."""
    require_model(request, principal, owner, name, Permission.MODEL_READ)
    versions = registry.list_versions(owner, name)
    return {"items": [version_json(v, manifest=False) for v in versions]}


@router.post("/models/{owner}/{name}/versions", status_code=201)
def publish_version(
    registry: deps.Registry,
    owner: str,
    name: str,
    body: PublishVersion,
    request: Request,
    response: Response,
    principal: CurrentPrincipal,
) -> dict[str, Any]:
    """Publish an immutable version: 201 when created, 200 when identical to the stored one."""
    require_model(request, principal, owner, name, Permission.MODEL_REGISTER)
    require_owner_tenant(request, principal, owner)
    published = registry.publish(
        owner,
        name,
        body.version,
        body.manifest,
        actor=principal.id,
        can_see=parent_filter(request, principal),
    )
    version = published.version
    response.status_code = 201 if published.created else 200
    response.headers["Location"] = f"/api/models/{owner}/{name}/versions/{version.version}"
    return version_json(version, signatures=registry.signatures(owner, name, version.version))


@router.get(VERSION_PATH)
def get_version(
    registry: deps.Registry,
    owner: str,
    name: str,
    version: str,
    request: Request,
    principal: CurrentPrincipal,
) -> dict[str, Any]:
    """A version with its current state and its signatures, verified on this read."""
    require_model(request, principal, owner, name, Permission.MODEL_READ)
    return version_json(
        registry.get_version(owner, name, version),
        signatures=registry.signatures(owner, name, version),
    )


@router.get(VERSION_PATH + "/events")
def list_events(
    registry: deps.Registry,
    owner: str,
    name: str,
    version: str,
    request: Request,
    principal: CurrentPrincipal,
) -> dict[str, Any]:
    require_model(request, principal, owner, name, Permission.MODEL_READ)
    events = registry.events(owner, name, version)
    return {"items": [event_json(e) for e in events]}


@router.post(
    VERSION_PATH + "/transitions",
    status_code=201,
    responses={
        202: {
            "description": "The validation runs on as a job (as `GET /api/jobs/{id}` "
            "shows it): follow it at `Location`",
            "content": {"application/json": {"schema": {"type": "object"}}},
        },
        **problems(409, 503),
        422: problem_response(422, "The validation failed (`validation_failed`, its report)"),
    },
)
async def transition(
    settings: deps.Settings,
    validations: deps.Validations,
    registry: deps.Registry,
    owner: str,
    name: str,
    version: str,
    body: Transition,
    request: Request,
    response: Response,
    principal: CurrentPrincipal,
    prefer: Annotated[str | None, Header(max_length=1024)] = None,
) -> dict[str, Any]:
    """Append a lifecycle event. ``to: validated`` runs the validation first, as a job
    (``kind: validation``): the answer waits for its end, up to ``VALIDATION_WAIT_SECONDS``
    (201 with the event, or the validation's failure); past that, or at once with
    ``Prefer: respond-async``, 202 with the job to follow (``Location``). 503
    ``validation_queue_full`` (with ``Retry-After``): too many validations wait."""
    await anyio.to_thread.run_sync(
        require_transition, request, principal, owner, name, version, body.to
    )
    request.state.audit_reason = body.reason
    if body.to != LifecycleState.VALIDATED.value:
        event = await anyio.to_thread.run_sync(
            partial(
                registry.transition,
                owner,
                name,
                version,
                body.to,
                actor=principal.id,
                reason=body.reason,
            )
        )
        return {"state": event.to_state.value, "event": event_json(event)}
    job, _ = await anyio.to_thread.run_sync(
        partial(validations.start, owner, name, version, principal, reason=body.reason)
    )
    asked_async = _respond_async(prefer)
    wait = 0.0 if asked_async else settings.validation.wait_seconds
    # Not waiting at all answers 202 every time, even for a job a fast runner has
    # already finished: the caller asked to follow the job, so it gets the job.
    if wait > 0:
        job = await validations.wait(job.id, wait)
    if wait <= 0 or not job.finished:
        response.status_code = 202
        response.headers["Location"] = f"/api/jobs/{job.id}"
        if asked_async:
            response.headers["Preference-Applied"] = "respond-async"
        return job_json(job)
    event = await anyio.to_thread.run_sync(validations.outcome, job)
    return {"state": event.to_state.value, "event": event_json(event), "job": job_json(job)}


def _respond_async(prefer: str | None) -> bool:
    """Whether a ``Prefer`` header (RFC 7240) asks for ``respond-async``."""
    if not prefer:
        return False
    tokens = (part.split(";")[0].strip().lower() for part in prefer.split(","))
    return "respond-async" in tokens


@router.get(VERSION_PATH + "/validation")
def get_validation(
    registry: deps.Registry,
    owner: str,
    name: str,
    version: str,
    request: Request,
    principal: CurrentPrincipal,
) -> dict[str, Any]:
    """The latest validation report."""
    require_model(request, principal, owner, name, Permission.MODEL_READ)
    return report_json(registry.validation(owner, name, version))


@router.get(VERSION_PATH + "/signatures")
def list_signatures(
    registry: deps.Registry,
    owner: str,
    name: str,
    version: str,
    request: Request,
    principal: CurrentPrincipal,
) -> dict[str, Any]:
    require_model(request, principal, owner, name, Permission.MODEL_READ)
    signatures = registry.signatures(owner, name, version)
    return {"items": [signature_json(s) for s in signatures]}


@router.post(VERSION_PATH + "/signatures", status_code=201)
def add_signature(
    registry: deps.Registry,
    owner: str,
    name: str,
    version: str,
    body: ExternalSignature,
    request: Request,
    principal: CurrentPrincipal,
) -> dict[str, Any]:
    """Attach an external signature; it must verify against the manifest digest."""
    require_model(request, principal, owner, name, Permission.MODEL_REGISTER)
    signature = registry.add_signature(
        owner,
        name,
        version,
        public_key=_b64(body.public_key, "public_key"),
        signature=_b64(body.signature, "signature"),
        signer=body.signer,
    )
    return signature_json(signature)


@router.get(VERSION_PATH + "/lineage")
def get_lineage(
    registry: deps.Registry,
    owner: str,
    name: str,
    version: str,
    request: Request,
    principal: CurrentPrincipal,
) -> dict[str, Any]:
    """Ancestors and descendants, transitively, with depth, relation and license."""
    require_model(request, principal, owner, name, Permission.MODEL_READ)
    lineage = registry.lineage(owner, name, version)
    return lineage_json(visible_lineage(request, principal, lineage))


def _b64(value: str, field: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidInput(
            f"{field} is not valid base64", code="invalid_signature", field=field
        ) from None
