"""Signing in to the console with the OpenID provider (authorization code with PKCE).

``GET /console/sign-in/oidc`` (the sign-in page's link) begins a sign-in: the request
under way (state, nonce, code verifier) is sealed into a short-lived HTTP-only cookie
(``PendingSignIns``) and the browser goes to the provider. A link, not a form: the
pages' Content-Security-Policy (``form-action 'self'``) refuses a form whose answer
redirects to another site; and beginning a sign-in grants nothing (the callback's state
must match this browser's cookie). ``GET /console/sign-in/oidc/callback`` completes it with the one
implementation of the code exchange and token verification (``OidcClient.complete``),
checks that the API accepts the sign-in's token, and starts a console session whose
credential is that token: pages then call the API as the person, and when the token
expires the API's 401 signs them out. Every refusal is the sign-in page with a message
and a stable code, and no session.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import quote, unquote

from fastapi import APIRouter
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from modelport.console.auth_pages import safe_next, sign_in_form_page
from modelport.console.calls import PlatformAPI
from modelport.console.web import (
    SESSION_COOKIE,
    SIGN_IN_COOKIE,
    oidc_of,
    render,
    sessions_of,
    set_cookie,
)
from modelport.errors import (
    Forbidden,
    InvalidInput,
    ModelportError,
    Unauthenticated,
    Unavailable,
)

if TYPE_CHECKING:
    from modelport.tenancy.oidc import OidcClient, SignIn

router = APIRouter()

PENDING_COOKIE = "modelport_console_oidc"
"""The sign-in under way, sealed (the browser can neither read nor forge it)."""
NEXT_COOKIE = "modelport_console_oidc_next"
"""The console page to land on; checked again when read (console paths only)."""


class SignInRefused(Exception):
    """A sign-in ends on the sign-in page with this message, code and status."""

    def __init__(self, message: str, code: str, status: int) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.status = status


STATUS_OF = ((InvalidInput, 400), (Unauthenticated, 401), (Forbidden, 403), (Unavailable, 503))
"""The page's status for what sign-in may raise (as the API's problems would answer)."""


def _refused(error: ModelportError) -> SignInRefused:
    status = next((code for kind, code in STATUS_OF if isinstance(error, kind)), 500)
    return SignInRefused(error.message, error.code, status)


def _no_secret_key() -> SignInRefused:
    return SignInRefused(
        "signing in needs MODELPORT_SECRET_KEY (it seals the sign-in under way)",
        "secret_key_required",
        503,
    )


def _not_configured(request: Request) -> Response:
    return render(
        request,
        "refused.html",
        status_code=404,
        code="not_found",
        message="Signing in with an OpenID provider is not configured.",
        session=None,
    )


def _refusal_page(request: Request, refused: SignInRefused, target: str | None) -> Response:
    response = sign_in_form_page(
        request,
        error=f"{refused.message} ({refused.code})",
        status_code=refused.status,
        target=target,
    )
    response.delete_cookie(PENDING_COOKIE, path="/console")
    response.delete_cookie(NEXT_COOKIE, path="/console")
    return response


@router.get("/sign-in/oidc")
async def begin(request: Request) -> Response:
    oidc = oidc_of(request)
    if oidc is None:
        return _not_configured(request)
    target = safe_next(request.query_params.get("next"))
    if oidc.pending is None:
        return _refusal_page(request, _no_secret_key(), target)
    try:
        begun = await run_in_threadpool(
            oidc.begin, str(request.url_for("console_oidc_callback"))
        )  # reads the provider's discovery document the first time
    except ModelportError as error:
        return _refusal_page(request, _refused(error), target)
    response = RedirectResponse(begun.url, status_code=303)
    ttl = oidc.pending.ttl_seconds
    set_cookie(response, request, PENDING_COOKIE, oidc.pending.seal(begun), ttl)
    set_cookie(response, request, NEXT_COOKIE, quote(target, safe="/"), ttl)
    return response


@router.get("/sign-in/oidc/callback", name="console_oidc_callback")
async def callback(
    request: Request, code: str | None = None, state: str | None = None, error: str | None = None
) -> Response:
    oidc = oidc_of(request)
    if oidc is None:
        return _not_configured(request)
    kept = request.cookies.get(NEXT_COOKIE)
    target = safe_next(unquote(kept) if kept else None)
    try:
        signed_in = await _complete(request, oidc, code=code, state=state, error=error)
        token = await _api_credential(request, signed_in)
        started = await run_in_threadpool(
            sessions_of(request).start, token, signed_in.principal.tenant
        )
    except SignInRefused as refused:
        return _refusal_page(request, refused, target)
    except ModelportError as refused:  # no secret key to seal the session's credential
        return _refusal_page(request, _refused(refused), target)
    response = RedirectResponse(target, status_code=303)
    ttl = int(sessions_of(request).ttl_seconds)
    set_cookie(response, request, SESSION_COOKIE, started.session_id, ttl)
    for used in (PENDING_COOKIE, NEXT_COOKIE, SIGN_IN_COOKIE):
        response.delete_cookie(used, path="/console")
    return response


async def _complete(
    request: Request,
    oidc: OidcClient,
    *,
    code: str | None,
    state: str | None,
    error: str | None,
) -> SignIn:
    """The provider's answer, checked: its state against this browser's sign-in, the
    code exchanged, the id token verified and mapped to a tenant member."""
    if error is not None:
        raise SignInRefused(f"the provider refused the sign-in ({error[:64]})", "oidc_denied", 401)
    if not code or not state:
        raise SignInRefused(
            "the provider's answer lacks code or state", "oidc_callback_invalid", 400
        )
    if oidc.pending is None:  # begin refused to start without it
        raise _no_secret_key()
    try:
        pending = oidc.pending.open(request.cookies.get(PENDING_COOKIE))
        return await run_in_threadpool(oidc.complete, pending, code=code, state=state)
    except ModelportError as refused:
        raise _refused(refused) from refused


async def _api_credential(request: Request, signed_in: SignIn) -> str:
    """The sign-in's token the API accepts, once the API has answered to it."""
    token = signed_in.api_token
    if token is None:
        raise _refused(
            Unauthenticated(
                "the provider issued no token this platform's API accepts "
                "(check MODELPORT_OIDC_AUDIENCE against the provider's access tokens)",
                code="oidc_no_api_token",
            )
        )
    tenant = quote(signed_in.principal.tenant or "", safe="")
    answer = await PlatformAPI(request.app, token).call(
        "GET", f"/api/tenants/{tenant}", signed_out_on_401=False
    )
    if not answer.ok:
        code = answer.body.get("code") if isinstance(answer.body, dict) else None
        message = answer.body.get("error") if isinstance(answer.body, dict) else None
        raise SignInRefused(
            str(message or "the API refused the sign-in's token"),
            str(code or "oidc_token_refused"),
            answer.status,
        )
    return token
