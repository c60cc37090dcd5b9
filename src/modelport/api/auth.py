"""Authentication: the single entry point every surface calls (``/api``, ``/v2``).

``require_principal`` authenticates the bearer key and leaves the principal on
``request.state`` (``principal``, ``tenant``, ``key_id``) for the limiter, the audit
log and authorization further down the request.
"""

from __future__ import annotations

from typing import Annotated

import anyio.to_thread
from fastapi import Depends, Request

from modelport.api import deps
from modelport.api.limiting import check_api_rate
from modelport.tenancy import Principal


def bearer_token(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer":
        return None
    return token.strip() or None


def require_principal(request: Request) -> Principal:
    principal = deps.authenticator_service(request).authenticate(bearer_token(request))
    _remember(request, principal)
    check_api_rate(request, principal)  # /api mutations count against the caller's rpm
    return principal


_FROM_HEADER = "from the Authorization header"


async def require_principal_async(request: Request, token: str | None = _FROM_HEADER) -> Principal:
    """``require_principal`` for async routes: without a thread hop when the key is cached.
    ``token``: the bearer token when the caller has read it already."""
    if token is _FROM_HEADER:
        token = bearer_token(request)
    principal = deps.authenticator_service(request).authenticate_cached(token)
    if principal is None:
        return await anyio.to_thread.run_sync(require_principal, request)
    _remember(request, principal)
    return principal


def _remember(request: Request, principal: Principal) -> None:
    request.state.principal = principal
    request.state.tenant = principal.tenant
    request.state.key_id = principal.key_id


CurrentPrincipal = Annotated[Principal, Depends(require_principal)]
