"""/api/templates: prompt templates as assets (create, publish versions, read, list,
render)."""

from __future__ import annotations

from typing import Any

import anyio.to_thread
from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from modelport.api import deps
from modelport.api.access import note_tenant, require_owner_tenant
from modelport.api.auth import CurrentPrincipal
from modelport.templates.types import Template, TemplateVersion
from modelport.tenancy.policy import Permission

router = APIRouter(tags=["templates"])


class CreateTemplate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    owner: str
    name: str
    visibility: str = "private"
    description: str = Field(default="", max_length=10_000)


class PublishTemplateVersion(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: str
    manifest: dict[str, Any]


class RenderBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    variables: dict[str, Any] = Field(default_factory=dict, max_length=64)


def template_json(template: Template, latest: TemplateVersion | None = None) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "owner": template.owner,
        "name": template.name,
        "visibility": template.visibility,
        "description": template.description,
        "created_at": template.created_at.isoformat(),
    }
    if latest is not None:
        doc["latest"] = {"version": latest.version, "license": latest.license}
    return doc


def template_version_json(version: TemplateVersion) -> dict[str, Any]:
    return {
        "template": f"{version.owner}/{version.name}",
        "version": version.version,
        "digest": version.digest,
        "license": version.license,
        "variables": [v.model_dump(mode="json") for v in version.manifest.variables],
        "manifest": version.manifest.model_dump(mode="json"),
        "created_at": version.created_at.isoformat(),
        "created_by": version.created_by,
    }


@router.post("/templates", status_code=201)
def create_template(
    templates: deps.Templates,
    body: CreateTemplate,
    request: Request,
    response: Response,
    principal: CurrentPrincipal,
) -> dict[str, Any]:
    """A new prompt template in a tenant's namespace (409 ``template_exists``)."""
    note_tenant(request, body.owner)
    require_owner_tenant(request, principal, body.owner)
    template = templates.create(
        principal,
        body.owner,
        body.name,
        visibility=body.visibility,
        description=body.description,
    )
    response.headers["Location"] = f"/api/templates/{template.owner}/{template.name}"
    return template_json(template)


@router.get("/templates")
def list_templates(
    templates: deps.Templates, principal: CurrentPrincipal, owner: str | None = None
) -> dict[str, Any]:
    """The templates the caller may see, each with its latest version."""
    found = templates.listing(principal, owner=owner)
    return {"items": [template_json(t, v) for t, v in found]}


@router.get("/templates/{owner}/{name}")
def get_template(
    templates: deps.Templates, owner: str, name: str, principal: CurrentPrincipal
) -> dict[str, Any]:
    template = templates.require(principal, owner, name, Permission.MODEL_READ)
    versions = templates.versions(principal, owner, name)
    return {
        **template_json(template, versions[-1] if versions else None),
        "versions": [template_version_json(v) for v in versions],
    }


@router.post("/templates/{owner}/{name}/versions", status_code=201)
async def publish_template_version(
    templates: deps.Templates,
    owner: str,
    name: str,
    body: PublishTemplateVersion,
    request: Request,
    response: Response,
    principal: CurrentPrincipal,
) -> dict[str, Any]:
    """Publish an immutable version; the same manifest again answers 200, another one
    409 ``template_version_exists``."""
    note_tenant(request, owner)
    version, created = await anyio.to_thread.run_sync(
        templates.publish, principal, owner, name, body.version, body.manifest
    )
    if not created:
        response.status_code = 200
    response.headers["Location"] = f"/api/templates/{owner}/{name}/versions/{version.version}"
    return template_version_json(version)


@router.get("/templates/{owner}/{name}/versions/{version}")
def get_template_version(
    templates: deps.Templates, owner: str, name: str, version: str, principal: CurrentPrincipal
) -> dict[str, Any]:
    found = templates.version(principal, owner, name, version)
    return template_version_json(found)


@router.post("/templates/{owner}/{name}/versions/{version}/render")
def render_template(
    templates: deps.Templates,
    owner: str,
    name: str,
    version: str,
    body: RenderBody,
    request: Request,
    principal: CurrentPrincipal,
) -> dict[str, Any]:
    """The version's messages with the given variables in (400 ``missing_variable``,
    ``unknown_variable``, ``invalid_variable``)."""
    found, messages = templates.render(principal, f"{owner}/{name}:{version}", body.variables)
    return {"template": found.ref, "digest": found.digest, "messages": messages}
