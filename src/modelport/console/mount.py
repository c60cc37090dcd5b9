"""The console mounted on the application: its routers (out of the API's schema), its
static files, and the redirects to sign in."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from fastapi import APIRouter, FastAPI
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute
from starlette.staticfiles import StaticFiles

from modelport.console import (
    account_pages,
    asset_pages,
    auth_pages,
    billing_pages,
    catalog_pages,
    chat_pages,
    endpoint_pages,
    jobs_pages,
    leaderboard_pages,
    limits_pages,
    oidc_pages,
    operations_pages,
    operator_pages,
    publisher_pages,
    workbench_pages,
)
from modelport.console.calls import SignedOut
from modelport.console.sessions import ConsoleSessions
from modelport.console.web import (
    PACKAGE,
    SESSION_COOKIE,
    CsrfRefused,
    NeedsSignIn,
    render,
    sign_in_redirect,
)

if TYPE_CHECKING:  # the ``oidc`` extra: imported only where OIDC is configured
    from modelport.tenancy.oidc import OidcClient


def install_console(
    app: FastAPI, sessions: ConsoleSessions, *, oidc: OidcClient | None = None
) -> None:
    """Mount the console's pages and static files on ``app``, out of the API's schema;
    ``oidc``: people may sign in with the OpenID provider too."""
    app.router.routes.extend(_page_routes())
    app.mount("/console/static", StaticFiles(directory=PACKAGE / "static"), name="console-static")
    app.state.console_sessions = sessions
    app.state.console_oidc = oidc

    async def needs_sign_in(request: Request, _: Exception) -> Response:
        return sign_in_redirect(request)

    async def signed_out(request: Request, _: Exception) -> Response:
        # The key was revoked or expired under the session: end it, then sign in again.
        await run_in_threadpool(sessions.end, request.cookies.get(SESSION_COOKIE))
        response = sign_in_redirect(request)
        response.delete_cookie(SESSION_COOKIE, path="/console")
        return response

    async def csrf_refused(request: Request, _: Exception) -> Response:
        return render(
            request,
            "refused.html",
            status_code=403,
            code="csrf_refused",
            message="The form was refused: reload the page and try again.",
            session=None,
        )

    app.add_exception_handler(NeedsSignIn, needs_sign_in)
    app.add_exception_handler(SignedOut, signed_out)
    app.add_exception_handler(CsrfRefused, csrf_refused)


@functools.cache
def _page_routes() -> tuple[BaseRoute, ...]:
    """The console's page routes, built once a process and shared by every app: FastAPI
    analyses each endpoint's signature as a route is included, which cost more than
    building the rest of an app. They hold no state of an app's: the sessions and the
    OIDC client are read from ``request.app.state``."""
    router = APIRouter(prefix="/console", include_in_schema=False)
    for pages in (
        auth_pages,
        oidc_pages,
        catalog_pages,
        chat_pages,
        account_pages,
        publisher_pages,
        endpoint_pages,
        billing_pages,
        limits_pages,
        jobs_pages,
        leaderboard_pages,
        asset_pages,
        workbench_pages,
        operator_pages,
        operations_pages,
    ):
        router.include_router(pages.router)
    return tuple(router.routes)
