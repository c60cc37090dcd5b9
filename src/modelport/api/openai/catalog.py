"""``GET /v1/models``: the models and endpoints a key may call, as OpenAI model objects.

The same rules as every call: a registry model the key may call (the catalog's
visibility and grants, then ``model.call`` by the key's roles and scopes) with a
version to serve, which for another tenant's model must be approved or deployed; an
endpoint of the key's own tenant (every endpoint for the platform admin).
``owned_by`` is the owning tenant. Blocking (database reads): run it in a thread.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request

from modelport.api import deps
from modelport.api.access import catalog_viewer, model_resource
from modelport.errors import NotFound
from modelport.registry.catalog import MAX_LIMIT
from modelport.registry.types import CatalogQuery, Model
from modelport.serving.endpoints.types import Endpoint
from modelport.tenancy.access import may_call_state
from modelport.tenancy.policy import Decision, Permission, TenantScoped, authorize
from modelport.tenancy.types import Principal

MAX_MODELS = 2000
"""Models listed at most (the catalog is read page by page up to there)."""


def callable_models(request: Request, principal: Principal) -> list[dict[str, Any]]:
    """Every registry model and endpoint ``principal`` may call, models first."""
    found = [model_object(m) for m in _models(request, principal)]
    found += [endpoint_object(e) for e in _endpoints(request, principal)]
    return found


def model_object(model: Model, name: str | None = None) -> dict[str, Any]:
    return {
        "id": name or model.ref,
        "object": "model",
        "created": int(model.created_at.timestamp()),
        "owned_by": model.owner,
        "kind": "model",
        "task": model.task or None,
    }


def endpoint_object(endpoint: Endpoint) -> dict[str, Any]:
    return {
        "id": endpoint.name,
        "object": "model",
        "created": int(endpoint.created_at.timestamp()),
        "owned_by": endpoint.tenant,
        "kind": "endpoint",
        "task": None,
    }


def _models(request: Request, principal: Principal) -> list[Model]:
    registry = deps.registry_service(request)
    viewer = catalog_viewer(request, principal)
    found: list[Model] = []
    cursor: str | None = None
    while len(found) < MAX_MODELS:
        page = registry.search(CatalogQuery(limit=MAX_LIMIT, cursor=cursor, viewer=viewer))
        for model in page.items:
            if _may_call(request, principal, model):
                found.append(model)
        cursor = page.next_cursor
        if cursor is None:
            break
    return found[:MAX_MODELS]


def callable_model(
    request: Request, principal: Principal, owner: str, name: str, version: str | None
) -> Model | None:
    """``owner/name`` if ``principal`` may call it at ``version`` (None: its default)."""
    try:
        model = deps.registry_service(request).get_model(owner, name)
    except NotFound:
        return None
    return model if _may_call(request, principal, model, version) else None


def _may_call(
    request: Request, principal: Principal, model: Model, version: str | None = None
) -> bool:
    resource = model_resource(request, principal, model.owner, model.name, model.visibility.value)
    if authorize(principal, Permission.MODEL_CALL, resource) is not Decision.ALLOW:
        return False
    try:
        resolved = deps.registry_service(request).resolve(model.owner, model.name, version)
    except NotFound:
        return False  # nothing to serve (yet)
    return may_call_state(principal, model.owner, resolved.state.value)


def _endpoints(request: Request, principal: Principal) -> list[Endpoint]:
    if principal.tenant is None and not principal.is_admin:
        return []
    plane = deps.serving_service(request)
    return [
        e
        for e in plane.endpoints.list_endpoints(principal.tenant)
        if authorize(principal, Permission.MODEL_CALL, TenantScoped(e.tenant)) is Decision.ALLOW
    ]
