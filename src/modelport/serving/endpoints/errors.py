"""The endpoints' errors that other layers raise too (an endpoint of another tenant
answers the very 404 of a missing one)."""

from __future__ import annotations

from modelport.errors import NotFound


def endpoint_not_found(name: str) -> NotFound:
    return NotFound(f"endpoint {name!r} does not exist", code="endpoint_not_found", endpoint=name)
