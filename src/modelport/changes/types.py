"""The change events: plain records, a topic and a few string fields each.

An event says what changed, not the new state: a subscriber drops what it cached and
reads afresh. Their wire form (``encode``/``decode``) is JSON, so processes of
different releases sharing one Redis can read each other's events; an event of a
topic this release does not know is ignored (nothing here caches what it names).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, ClassVar

import orjson


@dataclass(frozen=True)
class VersionPublished:
    """A new version of ``owner/name``: resolving the model without a version may pick it."""

    topic: ClassVar[str] = "registry.version_published"
    owner: str
    name: str
    version: str


@dataclass(frozen=True)
class VersionTransitioned:
    """A version's lifecycle state changed: who may call it, and what resolving the model
    picks, may have changed."""

    topic: ClassVar[str] = "registry.version_transitioned"
    owner: str
    name: str
    version: str
    state: str


@dataclass(frozen=True)
class AliasMoved:
    """An alias of ``owner/name`` was set, moved or deleted (``version`` None)."""

    topic: ClassVar[str] = "registry.alias_moved"
    owner: str
    name: str
    alias: str
    version: str | None


@dataclass(frozen=True)
class GrantChanged:
    """``namespace`` gave ``grantee`` a grant, or withdrew one (``given`` False)."""

    topic: ClassVar[str] = "tenancy.grant_changed"
    namespace: str
    grantee: str
    model: str | None
    given: bool


@dataclass(frozen=True)
class KeysRevoked:
    """API keys revoked, rotated or whose roles changed: no process may keep using what
    it cached of them."""

    topic: ClassVar[str] = "tenancy.keys_revoked"
    key_ids: tuple[str, ...]


@dataclass(frozen=True)
class EndpointChanged:
    """Endpoint ``name`` was created, or one of its deployments was created, activated,
    moved (a canary step or halt), rolled back, failed or retired."""

    topic: ClassVar[str] = "serving.endpoint_changed"
    name: str


@dataclass(frozen=True)
class ModerationPolicyChanged:
    """Tenant ``tenant`` stored a new version of its moderation policy."""

    topic: ClassVar[str] = "moderation.policy_changed"
    tenant: str


@dataclass(frozen=True)
class TenantCacheChanged:
    """Tenant ``tenant`` changed its response-cache flags (``no_cache``, ``shared_cache``)."""

    topic: ClassVar[str] = "tenancy.cache_changed"
    tenant: str


@dataclass(frozen=True)
class TenantSuspensionChanged:
    """The operator suspended tenant ``tenant``, or lifted its suspension."""

    topic: ClassVar[str] = "tenancy.suspension_changed"
    tenant: str


@dataclass(frozen=True)
class TenantTierChanged:
    """The operator moved tenant ``tenant`` to another tier."""

    topic: ClassVar[str] = "tenancy.tier_changed"
    tenant: str


Change = (
    VersionPublished
    | VersionTransitioned
    | AliasMoved
    | GrantChanged
    | KeysRevoked
    | EndpointChanged
    | ModerationPolicyChanged
    | TenantCacheChanged
    | TenantSuspensionChanged
    | TenantTierChanged
)

TOPICS: dict[str, type[Change]] = {
    kind.topic: kind
    for kind in (
        VersionPublished,
        VersionTransitioned,
        AliasMoved,
        GrantChanged,
        KeysRevoked,
        EndpointChanged,
        ModerationPolicyChanged,
        TenantCacheChanged,
        TenantSuspensionChanged,
        TenantTierChanged,
    )
}


class Unreadable(ValueError):
    """A message that claims a known topic but whose fields do not fit it."""


def encode(change: Change, origin: str) -> bytes:
    """The wire form: ``{"topic", "origin", "fields"}``; ``origin`` names the publisher."""
    return orjson.dumps({"topic": change.topic, "origin": origin, "fields": asdict(change)})


def decode(data: bytes) -> tuple[str, Change | None]:
    """(origin, event) from the wire form; the event is None for a topic this release does
    not know. Raises ``Unreadable`` for anything else that is not an event."""
    try:
        message: Any = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise Unreadable("not JSON") from exc
    if not isinstance(message, dict) or not isinstance(message.get("topic"), str):
        raise Unreadable("not an event")
    origin = message.get("origin")
    origin = origin if isinstance(origin, str) else ""
    kind = TOPICS.get(message["topic"])
    if kind is None:
        return origin, None
    values = message.get("fields")
    names = {f.name for f in fields(kind)}
    if not isinstance(values, dict) or set(values) != names:
        raise Unreadable(f"the fields of {kind.topic} do not fit")
    if not all(_fits(v) for v in values.values()):
        raise Unreadable(f"the fields of {kind.topic} do not fit")
    arguments: dict[str, Any] = {
        k: tuple(v) if isinstance(v, list) else v for k, v in values.items()
    }
    return origin, kind(**arguments)


def _fits(value: Any) -> bool:
    """A field's value: a string, a flag, none, or a list of strings."""
    if isinstance(value, list):
        return all(isinstance(v, str) for v in value)
    return value is None or isinstance(value, str | bool)
