"""The submitting principal, kept with its job: the job's stages run as it."""

from __future__ import annotations

from typing import Any

from modelport.tenancy.types import Principal


def principal_doc(principal: Principal) -> dict[str, Any]:
    return {
        "id": principal.id,
        "roles": sorted(principal.roles),
        "tenant": principal.tenant,
        "key_id": principal.key_id,
        "scopes": None if principal.scopes is None else sorted(principal.scopes),
        "kind": principal.kind,
    }


def principal_of(doc: dict[str, Any]) -> Principal:
    scopes = doc.get("scopes")
    return Principal(
        id=str(doc["id"]),
        roles=frozenset(doc.get("roles") or ()),
        tenant=doc.get("tenant"),
        key_id=doc.get("key_id"),
        scopes=None if scopes is None else frozenset(scopes),
        kind=str(doc.get("kind") or "member"),
    )
