"""Grants: a tenant shares a private model, or its whole namespace, with another."""

from __future__ import annotations

from modelport.client.family import AsyncFamily, Family
from modelport.client.transport import Call
from modelport.client.types import Grant, items_of


def list_call(tenant: str | None = None) -> Call[list[Grant]]:
    return Call("GET", "/api/grants", items_of(Grant.from_json), params={"tenant": tenant})


def add_call(
    grantee: str, *, namespace: str | None = None, model: str | None = None
) -> Call[Grant]:
    body = {"grantee": grantee, "namespace": namespace, "model": model}
    return Call("POST", "/api/grants", Grant.from_json, json=body)


def remove_call(grant_id: int) -> Call[None]:
    return Call("DELETE", f"/api/grants/{int(grant_id)}", lambda _: None)


class Grants(Family):
    """``client.grants``: ``model`` is a model's name within ``namespace``."""

    def list(self, tenant: str | None = None) -> list[Grant]:
        """Grants given by or to the caller's tenant (any tenant's for the admin)."""
        return self._t.run(list_call(tenant))

    def add(self, grantee: str, *, namespace: str | None = None, model: str | None = None) -> Grant:
        """Share ``namespace`` (default: the caller's tenant), or its ``model``."""
        return self._t.run(add_call(grantee, namespace=namespace, model=model))

    def remove(self, grant_id: int) -> None:
        self._t.run(remove_call(grant_id))


class AsyncGrants(AsyncFamily):
    async def list(self, tenant: str | None = None) -> list[Grant]:
        return await self._t.run(list_call(tenant))

    async def add(
        self, grantee: str, *, namespace: str | None = None, model: str | None = None
    ) -> Grant:
        return await self._t.run(add_call(grantee, namespace=namespace, model=model))

    async def remove(self, grant_id: int) -> None:
        await self._t.run(remove_call(grant_id))
