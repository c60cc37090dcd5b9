"""/api/models/{owner}/{name}/aliases: named pointers to versions, with history."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, ConfigDict

from modelport.api import deps
from modelport.api.access import require_model
from modelport.api.auth import CurrentPrincipal
from modelport.api.routes.registry_json import alias_event_json, alias_json
from modelport.registry.service import alias_not_found
from modelport.tenancy.policy import Permission

router = APIRouter(tags=["aliases"])
ALIAS_PATH = "/models/{owner}/{name}/aliases/{alias}"


class SetAlias(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: str


@router.get("/models/{owner}/{name}/aliases")
def list_aliases(
    registry: deps.Registry, owner: str, name: str, request: Request, principal: CurrentPrincipal
) -> dict[str, Any]:
    require_model(request, principal, owner, name, Permission.MODEL_READ)
    aliases = registry.aliases(owner, name)
    return {"items": [alias_json(a) for a in aliases]}


@router.get(ALIAS_PATH)
def get_alias(
    registry: deps.Registry,
    owner: str,
    name: str,
    alias: str,
    request: Request,
    principal: CurrentPrincipal,
) -> dict[str, Any]:
    require_model(request, principal, owner, name, Permission.MODEL_READ)
    for found in registry.aliases(owner, name):
        if found.alias == alias:
            return alias_json(found)
    raise alias_not_found(owner, name, alias)


@router.put(ALIAS_PATH)
def set_alias(
    registry: deps.Registry,
    owner: str,
    name: str,
    alias: str,
    body: SetAlias,
    request: Request,
    principal: CurrentPrincipal,
) -> dict[str, Any]:
    """Point the alias at a version (created or moved atomically)."""
    require_model(request, principal, owner, name, Permission.VERSION_DEPLOY)
    found = registry.set_alias(owner, name, alias, body.version, actor=principal.id)
    return alias_json(found)


@router.delete(ALIAS_PATH, status_code=204)
def delete_alias(
    registry: deps.Registry,
    owner: str,
    name: str,
    alias: str,
    request: Request,
    principal: CurrentPrincipal,
) -> Response:
    require_model(request, principal, owner, name, Permission.VERSION_DEPLOY)
    registry.delete_alias(owner, name, alias, actor=principal.id)
    return Response(status_code=204)


@router.get(ALIAS_PATH + "/history")
def alias_history(
    registry: deps.Registry,
    owner: str,
    name: str,
    alias: str,
    request: Request,
    principal: CurrentPrincipal,
) -> dict[str, Any]:
    require_model(request, principal, owner, name, Permission.MODEL_READ)
    history = registry.alias_history(owner, name, alias)
    return {"items": [alias_event_json(e) for e in history]}
