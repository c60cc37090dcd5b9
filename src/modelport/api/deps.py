"""Access to the wired services from a request."""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.requests import Request

if TYPE_CHECKING:
    from modelport.app import Services


def get_services(request: Request) -> Services:
    return request.app.state.services  # type: ignore[no-any-return]
