"""Change events: what changed in the platform's state, told to every cache that keeps it.

Services publish an event after the transaction that made the change commits; caches
subscribe (``modelport.app`` wires them). In one process the bus delivers at once
(``LocalChangeBus``); with Redis it also reaches every process of the installation
(``RedisChangeBus``), so a change made through a route, the CLI, another process or a
direct service call is seen everywhere as soon as it is committed.
"""

from modelport.changes.bus import ChangeBus, LocalChangeBus
from modelport.changes.types import (
    AliasMoved,
    Change,
    EndpointChanged,
    GrantChanged,
    KeysRevoked,
    ModerationPolicyChanged,
    TenantCacheChanged,
    TenantSuspensionChanged,
    TenantTierChanged,
    VersionPublished,
    VersionTransitioned,
)

__all__ = [
    "AliasMoved",
    "Change",
    "ChangeBus",
    "EndpointChanged",
    "GrantChanged",
    "KeysRevoked",
    "LocalChangeBus",
    "ModerationPolicyChanged",
    "TenantCacheChanged",
    "TenantSuspensionChanged",
    "TenantTierChanged",
    "VersionPublished",
    "VersionTransitioned",
]
