"""API paths of a tenant's members."""

from __future__ import annotations

from urllib.parse import quote


def members_path(tenant: str, member: str | None = None) -> str:
    path = f"/api/tenants/{quote(tenant, safe='')}/members"
    return path if member is None else f"{path}/{quote(member, safe='')}"
