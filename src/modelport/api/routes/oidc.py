"""Signing a person in with the OpenID provider: ``/auth/oidc/login`` and
``/auth/oidc/callback`` (not in the OpenAPI document; 404 while OIDC is off).

``login`` redirects to the provider and leaves the sign-in under way (state, nonce, PKCE
verifier) sealed in an HTTP-only, SameSite=Lax cookie scoped to ``/auth/oidc`` (Lax: the
provider's redirect back is a top-level GET that must carry it). ``callback`` opens it,
completes the sign-in, clears the cookie and answers the signed-in principal as JSON.
The console signs people in with routes of its own (``console/oidc_pages.py``) over the
same ``OidcClient``, and makes its session there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, RedirectResponse

from modelport.api import deps
from modelport.errors import InvalidInput, NotFound, Unauthenticated, Unavailable

if TYPE_CHECKING:  # the ``oidc`` extra: imported only where OIDC is configured
    from modelport.tenancy.oidc import OidcClient, PendingSignIns

router = APIRouter(include_in_schema=False)
COOKIE = "modelport_oidc"
COOKIE_PATH = "/auth/oidc"


def _oidc(request: Request) -> tuple[OidcClient, PendingSignIns]:
    oidc = deps.oidc_service(request)
    if oidc is None:
        raise NotFound("OpenID Connect sign-in is not configured", code="not_found")
    if oidc.pending is None:
        raise Unavailable(
            "signing in needs MODELPORT_SECRET_KEY (it seals the sign-in under way)",
            code="secret_key_required",
        )
    return oidc, oidc.pending


@router.get("/auth/oidc/login", name="oidc_login")
def login(request: Request) -> RedirectResponse:
    oidc, pending = _oidc(request)
    begun = oidc.begin(str(request.url_for("oidc_callback")))
    response = RedirectResponse(begun.url, status_code=302)
    response.set_cookie(
        COOKIE,
        pending.seal(begun),
        max_age=pending.ttl_seconds,
        path=COOKIE_PATH,
        httponly=True,
        samesite="lax",
        secure=request.url.scheme == "https",
    )
    return response


@router.get("/auth/oidc/callback", name="oidc_callback")
def callback(
    request: Request, code: str | None = None, state: str | None = None, error: str | None = None
) -> JSONResponse:
    oidc, pending = _oidc(request)
    if error is not None:
        raise Unauthenticated(f"the provider refused the sign-in ({error})", code="oidc_denied")
    if not code or not state:
        raise InvalidInput("the callback needs code and state", code="oidc_callback_invalid")
    signed_in = oidc.complete(pending.open(request.cookies.get(COOKIE)), code=code, state=state)
    principal = signed_in.principal
    response = JSONResponse(
        {
            "principal": principal.id,
            "tenant": principal.tenant,
            "roles": sorted(principal.roles),
            "subject": signed_in.subject,
            "groups": list(signed_in.groups),
        }
    )
    response.delete_cookie(COOKIE, path=COOKIE_PATH, httponly=True, samesite="lax")
    return response
