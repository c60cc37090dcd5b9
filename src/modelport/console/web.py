"""What every console page shares: the templates, the session cookie, the CSRF check,
and the redirect to sign in."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlparse

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from modelport.console.calls import Answer, PlatformAPI
from modelport.console.sessions import ConsoleSession, ConsoleSessions, tokens_match

if TYPE_CHECKING:  # the ``oidc`` extra: imported only where OIDC is configured
    from modelport.tenancy.oidc import OidcClient

PACKAGE = Path(__file__).parent
SESSION_COOKIE = "modelport_console"
"""Holds only the random session id."""
SIGN_IN_COOKIE = "modelport_console_signin"
"""A random token the sign-in form repeats (double submit): a page elsewhere cannot sign
a browser in under another person's key."""
CSRF_FIELD = "csrf_token"
CSRF_REFUSED = "csrf_refused"

templates = Environment(
    loader=FileSystemLoader(PACKAGE / "templates"),
    autoescape=select_autoescape(["html", "svg"], default=True),
    trim_blocks=True,
    lstrip_blocks=True,
)


class NeedsSignIn(Exception):
    """No live session: the page redirects to the sign-in form."""


def render(request: Request, name: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    html = templates.get_template(name).render(request=request, **context)
    response = HTMLResponse(html, status_code=status_code)
    # Pages show keys, usage and balances: never cached, never framed.
    response.headers["Cache-Control"] = "no-store"
    response.headers["X-Frame-Options"] = "DENY"
    response.headers["Content-Security-Policy"] = (
        "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
        "frame-ancestors 'none'; form-action 'self'"
    )
    response.headers["Referrer-Policy"] = "same-origin"
    return response


def refusal(request: Request, session: ConsoleSession | None, answer: Answer) -> HTMLResponse:
    """The page for a call the API refused: its status, message and stable code (another
    tenant's document is the API's 404, so the page learns nothing more than the API)."""
    code = answer.body.get("code", "") if isinstance(answer.body, dict) else ""
    return render(
        request,
        "refused.html",
        status_code=answer.status,
        code=code,
        message=answer.error,
        session=session,
    )


def is_https(request: Request) -> bool:
    """Whether the browser reached us over https (behind a proxy: uvicorn's
    ``--proxy-headers`` sets the scheme from X-Forwarded-Proto)."""
    return request.url.scheme == "https"


def set_cookie(response: Response, request: Request, name: str, value: str, max_age: int) -> None:
    """HttpOnly, SameSite=Lax, scoped to /console; Secure over https. Plain http (a
    laptop's ``modelport serve`` on 127.0.0.1) gets no Secure flag, or no browser would
    send it back: the documented development exception."""
    response.set_cookie(
        name,
        value,
        max_age=max_age,
        path="/console",
        secure=is_https(request),
        httponly=True,
        samesite="lax",
    )


def sessions_of(request: Request) -> ConsoleSessions:
    sessions: ConsoleSessions = request.app.state.console_sessions
    return sessions


def oidc_of(request: Request) -> OidcClient | None:
    """The OpenID provider people may sign in with; None when OIDC is off."""
    oidc: OidcClient | None = getattr(request.app.state, "console_oidc", None)
    return oidc


def provider_name(oidc: OidcClient) -> str:
    """The provider as the sign-in button names it: its issuer's host."""
    return urlparse(oidc.provider.issuer).netloc or oidc.provider.issuer


async def current_session(request: Request) -> ConsoleSession:
    """The request's live session, or ``NeedsSignIn``."""
    session_id = request.cookies.get(SESSION_COOKIE)
    session = await run_in_threadpool(sessions_of(request).find, session_id)
    if session is None:
        raise NeedsSignIn
    return session


def platform(request: Request, session: ConsoleSession) -> PlatformAPI:
    """The API, as the session's credential."""
    return PlatformAPI(request.app, session.credential)


async def checked_form(request: Request, session: ConsoleSession) -> dict[str, str]:
    """The posted form, once its CSRF token matches the session's; else ``CsrfRefused``."""
    form = await request.form()
    fields = {k: v for k, v in form.items() if isinstance(v, str)}
    if not tokens_match(session.csrf_token, fields.get(CSRF_FIELD)):
        raise CsrfRefused
    return fields


class CsrfRefused(Exception):
    """A form came without this session's CSRF token."""


def sign_in_redirect(request: Request) -> RedirectResponse:
    target = request.url.path
    if request.url.query:
        target += "?" + request.url.query
    if request.method != "GET":
        target = "/console/"
    return RedirectResponse(f"/console/sign-in?next={quote(target, safe='')}", status_code=303)


def new_sign_in_token() -> str:
    return secrets.token_urlsafe(24)
