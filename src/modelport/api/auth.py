"""Authentication dependency for ``/api`` routes."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from modelport.api.deps import get_services
from modelport.tenancy import Principal


def bearer_token(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer":
        return None
    return token.strip() or None


def require_principal(request: Request) -> Principal:
    return get_services(request).authenticator.authenticate(bearer_token(request))


CurrentPrincipal = Annotated[Principal, Depends(require_principal)]
