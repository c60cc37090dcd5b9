"""The operator's pages: tenants (list, create, settings, tier, suspension), a tenant's
members and their roles, the audit log with filters, and worker and model health. The
platform admin sees every tenant; a tenant's owner, their own; anyone else gets the
API's refusal."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlencode

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from modelport.console.calls import Answer
from modelport.console.sessions import ConsoleSession
from modelport.console.web import checked_form, current_session, platform, refusal, render

router = APIRouter(prefix="/operator")

ROLES = ("admin", "approver", "billing", "consumer", "deployer", "owner", "publisher")
"""The roles a form offers (tenancy's, which a test keeps in step); the API decides who
may give which (``admin`` only the platform admin) and refuses unknown ones."""
AUDIT_FILTERS = ("tenant", "actor", "action", "outcome", "since", "until")
"""The audit log's filters, as ``GET /api/audit`` names them."""
OUTCOMES = ("success", "denied", "failed", "error")
AUDIT_PAGE = "50"
TIERS = ("free", "standard", "premium")
"""The tiers a form offers (tenancy's ``Tier``, which a test keeps in step), lowest first."""
SETTINGS = ("require_separation", "no_cache", "shared_cache")
"""A tenant's switches, as ``PATCH /api/tenants/{tenant}`` names them."""


def _q(segment: str) -> str:
    return quote(segment, safe="")


async def _form_with_roles(
    request: Request, session: ConsoleSession
) -> tuple[dict[str, str], list[str]]:
    """The checked form, and the roles ticked in it (one ``role`` checkbox each, so read
    from the multi-dict, which starlette parsed once for both)."""
    form = await checked_form(request, session)
    raw = await request.form()
    return form, [v for k, v in raw.multi_items() if k == "role" and isinstance(v, str)]


# ---- tenants


@router.get("/tenants")
async def tenants(request: Request) -> Response:
    session = await current_session(request)
    return await _tenants_page(request, session)


async def _tenants_page(
    request: Request,
    session: ConsoleSession,
    *,
    error: str | None = None,
    status_code: int = 200,
    entered: dict[str, str] | None = None,
) -> Response:
    answer = await platform(request, session).get("/api/tenants")
    if not answer.ok:
        return refusal(request, session, answer)
    return render(
        request,
        "operator_tenants.html",
        status_code=status_code,
        session=session,
        tenants=answer.body.get("items", []),
        error=error,
        entered=entered or {},
    )


@router.post("/tenants")
async def create_tenant(request: Request) -> Response:
    """A new tenant (the API allows only the platform admin), with an optional first
    owner; then its page."""
    session = await current_session(request)
    form = await checked_form(request, session)
    slug = form.get("slug", "").strip()
    body: dict[str, Any] = {
        "slug": slug,
        "name": form.get("name", "").strip(),
        "require_separation": form.get("require_separation") == "on",
    }
    if owner := form.get("owner", "").strip():
        body["owner"] = owner
    answer = await platform(request, session).call("POST", "/api/tenants", json=body)
    if not answer.ok:
        return await _tenants_page(
            request, session, error=answer.error, status_code=answer.status, entered=form
        )
    return RedirectResponse(f"/console/operator/tenants/{_q(slug)}", status_code=303)


@router.get("/tenants/{tenant}")
async def tenant_page(tenant: str, request: Request) -> Response:
    session = await current_session(request)
    return await _tenant_page(request, session, tenant)


async def _tenant_page(
    request: Request,
    session: ConsoleSession,
    tenant: str,
    *,
    error: str | None = None,
    status_code: int = 200,
) -> Response:
    api = platform(request, session)
    found = await api.get(f"/api/tenants/{_q(tenant)}")
    if not found.ok:
        return refusal(request, session, found)
    members = await api.get(f"/api/tenants/{_q(tenant)}/members")
    if not members.ok:  # a member who may read the tenant but not its members
        return refusal(request, session, members)
    return render(
        request,
        "operator_tenant.html",
        status_code=status_code,
        session=session,
        tenant=found.body,
        members=members.body.get("items", []),
        roles=ROLES,
        tiers=TIERS,
        error=error,
    )


async def _then_tenant(
    request: Request, session: ConsoleSession, tenant: str, answer: Answer
) -> Response:
    """Back to the tenant's page: redirected when the change was made, else shown again
    with the API's error under its status."""
    if answer.ok:
        return RedirectResponse(f"/console/operator/tenants/{_q(tenant)}", status_code=303)
    return await _tenant_page(
        request, session, tenant, error=answer.error, status_code=answer.status
    )


@router.post("/tenants/{tenant}/settings")
async def update_tenant(tenant: str, request: Request) -> Response:
    """The tenant's name and switches (unticked boxes are sent as false)."""
    session = await current_session(request)
    form = await checked_form(request, session)
    body: dict[str, Any] = {name: form.get(name) == "on" for name in SETTINGS}
    body["name"] = form.get("name", "").strip()
    answer = await platform(request, session).call("PATCH", f"/api/tenants/{_q(tenant)}", json=body)
    return await _then_tenant(request, session, tenant, answer)


@router.post("/tenants/{tenant}/tier")
async def set_tier(tenant: str, request: Request) -> Response:
    """Move the tenant to the tier chosen (the API allows the platform admin only, and
    refuses a tier it does not know)."""
    session = await current_session(request)
    form = await checked_form(request, session)
    answer = await platform(request, session).call(
        "PUT", f"/api/tenants/{_q(tenant)}/tier", json={"tier": form.get("tier", "")}
    )
    return await _then_tenant(request, session, tenant, answer)


@router.post("/tenants/{tenant}/suspend")
async def suspend_tenant(tenant: str, request: Request) -> Response:
    """Suspend the tenant with the reason given (the API allows the platform admin only)."""
    session = await current_session(request)
    form = await checked_form(request, session)
    answer = await platform(request, session).call(
        "POST", f"/api/tenants/{_q(tenant)}/suspend", json={"reason": form.get("reason", "")}
    )
    return await _then_tenant(request, session, tenant, answer)


@router.post("/tenants/{tenant}/reactivate")
async def reactivate_tenant(tenant: str, request: Request) -> Response:
    session = await current_session(request)
    await checked_form(request, session)
    answer = await platform(request, session).call("POST", f"/api/tenants/{_q(tenant)}/reactivate")
    return await _then_tenant(request, session, tenant, answer)


@router.post("/tenants/{tenant}/members")
async def add_member(tenant: str, request: Request) -> Response:
    session = await current_session(request)
    form, roles = await _form_with_roles(request, session)
    body = {
        "name": form.get("name", "").strip(),
        "kind": form.get("kind") or "member",
        "roles": roles,
    }
    answer = await platform(request, session).call(
        "POST", f"/api/tenants/{_q(tenant)}/members", json=body
    )
    return await _then_tenant(request, session, tenant, answer)


@router.post("/tenants/{tenant}/members/{member}/roles")
async def set_roles(tenant: str, member: str, request: Request) -> Response:
    """Replace the member's roles with the ticked ones."""
    session = await current_session(request)
    _, roles = await _form_with_roles(request, session)
    answer = await platform(request, session).call(
        "PATCH", f"/api/tenants/{_q(tenant)}/members/{_q(member)}", json={"roles": roles}
    )
    return await _then_tenant(request, session, tenant, answer)


@router.post("/tenants/{tenant}/members/{member}/remove")
async def remove_member(tenant: str, member: str, request: Request) -> Response:
    session = await current_session(request)
    await checked_form(request, session)
    answer = await platform(request, session).call(
        "DELETE", f"/api/tenants/{_q(tenant)}/members/{_q(member)}"
    )
    return await _then_tenant(request, session, tenant, answer)


# ---- audit log


@router.get("/audit")
async def audit(request: Request) -> Response:
    """The audit log, newest first, narrowed by the GET form's filters; a page of events
    at a time, by the API's cursor."""
    session = await current_session(request)
    filters = {name: request.query_params.get(name, "").strip() for name in AUDIT_FILTERS}
    cursor = request.query_params.get("cursor") or None
    answer = await platform(request, session).get(
        "/api/audit", **filters, cursor=cursor, limit=AUDIT_PAGE
    )
    if answer.status in (401, 403, 404):
        return refusal(request, session, answer)
    kept = {k: v for k, v in filters.items() if v}
    next_cursor = answer.body.get("next_cursor") if answer.ok else None
    return render(
        request,
        "operator_audit.html",
        status_code=answer.status,
        session=session,
        filters=filters,
        outcomes=OUTCOMES,
        events=answer.body.get("items", []) if answer.ok else [],
        error=None if answer.ok else answer.error,
        next_url="/console/operator/audit?" + urlencode({**kept, "cursor": next_cursor})
        if next_cursor
        else None,
        first_url="/console/operator/audit?" + urlencode(kept) if cursor else None,
    )


# ---- health


@router.get("/health")
async def health(request: Request) -> Response:
    """Readiness, the versions this process hosts (state, queue, quarantine) and the
    remote backends' probes and circuit breakers."""
    session = await current_session(request)
    api = platform(request, session)
    hosted = await api.get("/api/runtime/models")
    if not hosted.ok:
        return refusal(request, session, hosted)
    ready = await api.call("GET", "/readyz")
    backends = await api.get("/api/backends")
    return render(
        request,
        "operator_health.html",
        session=session,
        ready=_readiness(ready),
        hosts_models=bool(hosted.body.get("hosts_models")),
        versions=hosted.body.get("items", []),
        backends=backends.body.get("items", []) if backends.ok else [],
        backends_error=None if backends.ok else backends.error,
    )


def _readiness(answer: Answer) -> dict[str, str]:
    body = answer.body if isinstance(answer.body, dict) else {}
    return {
        "status": str(body.get("status") or f"HTTP {answer.status}"),
        "database": str(body.get("database") or ("ok" if answer.ok else "unknown")),
    }
