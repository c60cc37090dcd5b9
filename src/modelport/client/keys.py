"""API keys: create, list, rotate, revoke. A key's secret is returned only on creation and
rotation (``Key.key``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from modelport.client.family import AsyncFamily, Family
from modelport.client.transport import Call, segment
from modelport.client.types import Key, items_of


def create_call(
    name: str,
    *,
    tenant: str | None = None,
    member: str | None = None,
    scopes: Sequence[str] | None = None,
    expires_in_seconds: int | None = None,
) -> Call[Key]:
    body: dict[str, Any] = {"name": name, "tenant": tenant, "member": member}
    if scopes is not None:
        body["scopes"] = list(scopes)
    if expires_in_seconds is not None:
        body["expires_in_seconds"] = expires_in_seconds
    return Call("POST", "/api/keys", Key.from_json, json=body)


def list_call(*, tenant: str | None = None, member: str | None = None) -> Call[list[Key]]:
    params = {"tenant": tenant, "member": member}
    return Call("GET", "/api/keys", items_of(Key.from_json), params=params)


def revoke_call(key_id: str) -> Call[Key]:
    return Call("DELETE", f"/api/keys/{segment(key_id)}", Key.from_json)


def rotate_call(key_id: str) -> Call[Key]:
    return Call("POST", f"/api/keys/{segment(key_id)}/rotate", Key.from_json)


class Keys(Family):
    """``client.keys``: keys are named by their id."""

    def create(
        self,
        name: str,
        *,
        tenant: str | None = None,
        member: str | None = None,
        scopes: Sequence[str] | None = None,
        expires_in_seconds: int | None = None,
    ) -> Key:
        call = create_call(
            name,
            tenant=tenant,
            member=member,
            scopes=scopes,
            expires_in_seconds=expires_in_seconds,
        )
        return self._t.run(call)

    def list(self, *, tenant: str | None = None, member: str | None = None) -> list[Key]:
        return self._t.run(list_call(tenant=tenant, member=member))

    def revoke(self, key_id: str) -> Key:
        return self._t.run(revoke_call(key_id))

    def rotate(self, key_id: str) -> Key:
        return self._t.run(rotate_call(key_id))


class AsyncKeys(AsyncFamily):
    async def create(
        self,
        name: str,
        *,
        tenant: str | None = None,
        member: str | None = None,
        scopes: Sequence[str] | None = None,
        expires_in_seconds: int | None = None,
    ) -> Key:
        call = create_call(
            name,
            tenant=tenant,
            member=member,
            scopes=scopes,
            expires_in_seconds=expires_in_seconds,
        )
        return await self._t.run(call)

    async def list(self, *, tenant: str | None = None, member: str | None = None) -> list[Key]:
        return await self._t.run(list_call(tenant=tenant, member=member))

    async def revoke(self, key_id: str) -> Key:
        return await self._t.run(revoke_call(key_id))

    async def rotate(self, key_id: str) -> Key:
        return await self._t.run(rotate_call(key_id))
