"""Sign in with an API key, and sign out."""

from __future__ import annotations

from fastapi import APIRouter
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from modelport.console.calls import PlatformAPI
from modelport.console.sessions import tokens_match
from modelport.console.web import (
    CSRF_FIELD,
    SESSION_COOKIE,
    SIGN_IN_COOKIE,
    checked_form,
    current_session,
    new_sign_in_token,
    oidc_of,
    provider_name,
    render,
    sessions_of,
    set_cookie,
)
from modelport.errors import Unavailable
from modelport.tenancy.keys import parse_key

router = APIRouter()

SIGN_IN_TOKEN_AGE = 3600


def safe_next(target: str | None) -> str:
    """Where to go after signing in: a console page only (never another site)."""
    if target and target.startswith("/console") and not target.startswith("//"):
        return target
    return "/console/"


def sign_in_form_page(
    request: Request, *, error: str = "", status_code: int = 200, target: str | None = None
) -> HTMLResponse:
    """The sign-in form (with ``error``), offering the OpenID provider where one is
    configured; ``target``: where to go after (default: the ``next`` query parameter)."""
    token = new_sign_in_token()
    oidc = oidc_of(request)
    response = render(
        request,
        "sign_in.html",
        status_code=status_code,
        error=error,
        csrf_token=token,
        next=safe_next(target if target is not None else request.query_params.get("next")),
        provider=provider_name(oidc) if oidc is not None else None,
        session=None,
    )
    set_cookie(response, request, SIGN_IN_COOKIE, token, SIGN_IN_TOKEN_AGE)
    return response


@router.get("/sign-in")
async def sign_in_form(request: Request) -> Response:
    return sign_in_form_page(request)


async def _tenant_of(api: PlatformAPI, key: str) -> tuple[bool, str | None]:
    """Whether the API accepts ``key``, and its tenant (None: a platform-wide key)."""
    parsed = parse_key(key)
    if parsed is None:  # not a tenant's key: the platform admin's, if anyone's
        answer = await api.call("GET", "/api/tenants", signed_out_on_401=False)
        return answer.ok, None
    answer = await api.call("GET", f"/api/keys/{parsed.key_id}", signed_out_on_401=False)
    if not answer.ok or not isinstance(answer.body, dict):
        return False, None
    tenant = answer.body.get("tenant")
    return True, tenant if isinstance(tenant, str) else None


@router.post("/sign-in")
async def sign_in(request: Request) -> Response:
    form = await request.form()
    given = form.get(CSRF_FIELD)
    expected = request.cookies.get(SIGN_IN_COOKIE)
    if expected is None or not tokens_match(expected, given if isinstance(given, str) else None):
        return render(request, "refused.html", status_code=403, code="csrf_refused", session=None)
    key = form.get("api_key")
    key = key.strip() if isinstance(key, str) else ""
    if not key or len(key) > 512:
        return sign_in_form_page(request, error="Enter an API key.", status_code=400)
    accepted, tenant = await _tenant_of(PlatformAPI(request.app, key), key)
    if not accepted:
        return sign_in_form_page(request, error="That API key was not accepted.", status_code=401)
    try:
        started = await run_in_threadpool(sessions_of(request).start, key, tenant)
    except Unavailable as refused:  # no secret key to seal the session's credential
        return sign_in_form_page(
            request, error=f"{refused.message} ({refused.code})", status_code=503
        )
    target = form.get("next")
    response = RedirectResponse(
        safe_next(target if isinstance(target, str) else None), status_code=303
    )
    ttl = int(sessions_of(request).ttl_seconds)
    set_cookie(response, request, SESSION_COOKIE, started.session_id, ttl)
    response.delete_cookie(SIGN_IN_COOKIE, path="/console")
    return response


@router.post("/sign-out")
async def sign_out(request: Request) -> Response:
    session = await current_session(request)
    await checked_form(request, session)
    await run_in_threadpool(sessions_of(request).end, request.cookies.get(SESSION_COOKIE))
    response = RedirectResponse("/console/sign-in", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/console")
    return response
