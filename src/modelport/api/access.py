"""Authorization on the HTTP surfaces: gather a resource's facts (plain reads, grants
once per request), ask the one access rule (``tenancy.access``, ``policy.authorize``),
and turn its answer into the error the caller may see (``tenancy.enforce``). The same
rule decides an inference call (``inference.access``, from cached facts); separation of
duties is tenancy's (``check_transition``).

HIDE becomes the very 404 an absent resource gives, so a caller cannot tell a
private model of another tenant from a model that does not exist. Each check also
names the tenant the request is about on ``request.state.audit_tenant``, so the
audit log can show the event to that tenant's owners.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from fastapi import Depends
from starlette.requests import Request

from modelport.api import deps
from modelport.api.auth import CurrentPrincipal
from modelport.blobs._common import blob_not_found
from modelport.digests import check_digest
from modelport.errors import NotFound
from modelport.registry.errors import model_not_found
from modelport.registry.names import check_owner
from modelport.registry.types import CatalogViewer, Lineage, Model
from modelport.tenancy.access import decide_model, is_operator, needs_grants
from modelport.tenancy.access import model_resource as resource_of
from modelport.tenancy.enforce import decided
from modelport.tenancy.enforce import enforce as enforce  # re-exported for the routes
from modelport.tenancy.enforce import forbidden as forbidden  # re-exported for the routes
from modelport.tenancy.policy import (
    Decision,
    ModelResource,
    Namespace,
    Permission,
    Platform,
    TenantScoped,
    permissions_of,
    transition_permission,
)
from modelport.tenancy.repository import tenant_not_found
from modelport.tenancy.types import GrantSet, Principal


def note_tenant(request: Request, tenant: str | None) -> None:
    """The tenant this request is about (for the audit log)."""
    if tenant is not None:
        request.state.audit_tenant = tenant


def require_platform(request: Request, principal: Principal, permission: Permission) -> None:
    enforce(principal, permission, Platform(), hidden=lambda: NotFound("not found"))


def require_tenant(
    request: Request,
    principal: Principal,
    tenant: str,
    permission: Permission,
    *,
    owner_id: str | None = None,
) -> None:
    """Something of ``tenant`` (its settings, members, keys, grants, audit)."""
    note_tenant(request, tenant)
    enforce(
        principal,
        permission,
        TenantScoped(tenant, owner_id),
        hidden=lambda: tenant_not_found(tenant),
    )


def require_namespace(
    request: Request, principal: Principal, namespace: str, permission: Permission
) -> None:
    """Creating something in the model namespace ``namespace``, which must be a tenant's."""
    note_tenant(request, namespace)
    enforce(principal, permission, Namespace(namespace), hidden=lambda: NotFound("not found"))
    require_owner_tenant(request, principal, namespace)


def require_owner_tenant(request: Request, principal: Principal, owner: str) -> None:
    """Models live in a tenant's namespace: a model, a version, an endpoint of an owner
    that is no tenant could be published but never served or billed, so creating one
    there is refused (404 ``tenant_not_found``), naming how to create the tenant. Only a
    principal outside ``owner`` (the admin) can get this far into another namespace."""
    if principal.tenant == owner:
        return
    check_owner(owner)  # a malformed name is a 400, whether or not such a tenant exists
    try:
        deps.tenancy_service(request).get_tenant(owner)
    except NotFound:
        raise NotFound(
            f"owner '{owner}' is not a tenant: models are published into a tenant's "
            f"namespace; create it first (modelport tenants create {owner}, or "
            f'POST /api/tenants {{"slug": "{owner}"}}), then publish again',
            code="tenant_not_found",
            tenant=owner,
        ) from None


def grants_of(request: Request, principal: Principal) -> GrantSet:
    """What other tenants shared with the caller's tenant (looked up once per request)."""
    cached = getattr(request.state, "grants", None)
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    grants = (
        deps.tenancy_service(request).grants_to(principal.tenant)
        if principal.tenant is not None
        else GrantSet()
    )
    request.state.grants = grants
    return grants


def _grants_for(
    request: Request, principal: Principal, owner: str, visibility: str
) -> GrantSet | None:
    """The caller's tenant's grants where they can change the answer (else not read)."""
    return grants_of(request, principal) if needs_grants(principal, owner, visibility) else None


def model_resource(
    request: Request, principal: Principal, owner: str, name: str, visibility: str
) -> ModelResource:
    grants = _grants_for(request, principal, owner, visibility)
    return resource_of(principal, owner, name, visibility, grants)


def can_see(request: Request, principal: Principal, owner: str, name: str, visibility: str) -> bool:
    grants = _grants_for(request, principal, owner, visibility)
    decision = decide_model(principal, Permission.MODEL_READ, owner, name, visibility, grants)
    return decision is Decision.ALLOW


def require_model(
    request: Request, principal: Principal, owner: str, name: str, permission: Permission
) -> Model:
    """The model ``owner/name`` if the caller may do ``permission`` on it (404 if it may not
    see it, exactly as if it did not exist; 403 if it may see but not do this)."""
    note_tenant(request, owner)
    model = deps.registry_service(request).get_model(owner, name)
    visibility = model.visibility.value
    grants = _grants_for(request, principal, owner, visibility)
    decided(
        decide_model(principal, permission, owner, name, visibility, grants),
        permission,
        hidden=lambda: model_not_found(owner, name),
    )
    return model


def catalog_viewer(request: Request, principal: Principal) -> CatalogViewer | None:
    """What the caller may see in the catalog, as plain filter data (None: everything)."""
    if is_operator(principal):
        return None
    if Permission.MODEL_READ not in permissions_of(principal):
        # A key scoped away from reading models sees nothing, not even public ones.
        return CatalogViewer(tenant=None, namespaces=frozenset(), models=frozenset())
    grants = grants_of(request, principal)
    return CatalogViewer(
        tenant=principal.tenant, namespaces=grants.namespaces, models=grants.models
    )


def visible_lineage(request: Request, principal: Principal, lineage: Lineage) -> Lineage:
    """The lineage without the ancestors and descendants the caller may not see."""
    if is_operator(principal):
        return lineage
    registry = deps.registry_service(request)
    visibility: dict[tuple[str, str], str] = {}

    def seen(owner: str, name: str) -> bool:
        if (owner, name) not in visibility:
            visibility[owner, name] = registry.get_model(owner, name).visibility.value
        return can_see(request, principal, owner, name, visibility[owner, name])

    return Lineage(
        version=lineage.version,
        ancestors=tuple(n for n in lineage.ancestors if seen(n.owner, n.name)),
        descendants=tuple(n for n in lineage.descendants if seen(n.owner, n.name)),
    )


def require_transition(
    request: Request, principal: Principal, owner: str, name: str, version: str, to: str
) -> None:
    """The permission a lifecycle transition needs, and separation of duties: where the
    tenant requires it, nobody approves or rejects a version they published themselves
    (unless they hold ``version.override``)."""
    permission = transition_permission(to)
    require_model(request, principal, owner, name, permission)
    if permission is not Permission.VERSION_APPROVE or principal.tenant != owner:
        return
    published_by = deps.registry_service(request).get_version(owner, name, version).created_by
    deps.tenancy_service(request).check_transition(
        principal, owner, f"{owner}/{name}:{version}", published_by, to
    )


def require_uploader(request: Request, principal: Principal) -> None:
    """Anyone who may register models in their tenant may upload (an upload's id, 192
    random bits, is its capability). Blobs are stored once per digest, but a commit
    records the uploading tenant as holding the blob: only that makes it usable."""
    namespace = principal.tenant or ""
    if is_operator(principal):
        return
    note_tenant(request, principal.tenant)
    enforce(
        principal,
        Permission.MODEL_REGISTER,
        Namespace(namespace),
        hidden=lambda: NotFound("not found"),
    )


def require_blob(request: Request, principal: Principal, digest: str) -> None:
    """Reading a blob (``GET``, or ``HEAD`` to skip uploading it again) needs one of:
    being the admin; being an uploader of a tenant that holds it (uploaded its bytes);
    or seeing a model with a version that lists it and whose owner holds it. A version
    that merely lists a digest, without its owner holding the bytes, opens nothing, and
    grants are read on every request, so access ends when the grant does. Otherwise
    404, exactly as for a blob that is not stored."""
    check_digest(digest)
    held = permissions_of(principal)
    if Permission.PLATFORM_MANAGE in held:
        return
    if (
        Permission.MODEL_REGISTER in held
        and principal.tenant is not None
        and deps.blobs_service(request).held_by(principal.tenant, digest)
    ):
        return
    holders = deps.tenancy_service(request).models_holding_blob(digest)
    if not any(can_see(request, principal, o, n, v) for o, n, v in holders):
        raise blob_not_found(digest)


def _uploader(request: Request, principal: CurrentPrincipal) -> Principal:
    require_uploader(request, principal)
    return principal


Uploader = Annotated[Principal, Depends(_uploader)]
"""A route dependency: an authenticated principal that may upload blobs."""


def visible_model_refs(request: Request, principal: Principal, refs: list[str]) -> set[str]:
    """Which ``owner/name`` refs the caller may see (unknown ones are not visible)."""
    if is_operator(principal):
        return set(refs)
    registry = deps.registry_service(request)
    seen: set[str] = set()
    for ref in set(refs):
        owner, _, name = ref.partition("/")
        try:
            visibility = registry.get_model(owner, name).visibility.value
        except NotFound:
            continue
        if can_see(request, principal, owner, name, visibility):
            seen.add(ref)
    return seen


def parent_filter(request: Request, principal: Principal) -> Callable[[str, str, str], bool] | None:
    """For publishing: which models the caller may name as lineage parents (the ones it
    can see). Grants are read now, since the filter runs inside the registry's
    transaction."""
    if is_operator(principal):
        return None
    grants_of(request, principal)
    return lambda owner, name, visibility: can_see(request, principal, owner, name, visibility)
