"""Memory admission: may a version be loaded, and which idle versions make room for it.

Pure logic over plain records; ``modelport.runtime.host`` applies it under its lock,
before anything of the new version is fetched or allocated.

Policy. Each resident version has a *keep value*: how much work evicting it would
waste per byte it frees::

    value = (1 + recent_uses) * (reload_seconds + 0.1) / bytes

``recent_uses`` is a use count that decays with a five-minute time constant, so a
version used often, expensive to reload and small is kept; one idle, cheap to
reload and large goes first. Pinned versions and versions with requests queued or
executing are never evicted, nor are versions still loading. Victims are taken by
ascending value until the newcomer fits. If it cannot fit even with every
evictable version gone, nothing is evicted and the load is refused with
``Unavailable`` code ``insufficient_memory`` (HTTP 503: the server is short of a
resource right now, which may change when versions are unloaded; 507 is WebDAV's
storage status and says nothing useful to an inference client).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from modelport.errors import Unavailable
from modelport.runtime.types import VersionKey

USE_DECAY_SECONDS = 300.0
"""Time constant of the decaying use count."""


@dataclass(frozen=True)
class MemoryBudget:
    """Bytes all hosted versions may take together; None means not limited."""

    host_bytes: int | None
    device_bytes: int | None = None


@dataclass(frozen=True)
class Resident:
    """A hosted version as admission sees it."""

    key: VersionKey
    host_bytes: int
    device_bytes: int
    evictable: bool
    """Ready, not pinned and with no request in flight."""
    recent_uses: float
    reload_seconds: float


@dataclass(frozen=True)
class AdmissionPlan:
    evict: tuple[VersionKey, ...]


def decayed_uses(previous: float, last_used: float, now: float) -> float:
    """The decaying use count ``previous`` (as of ``last_used``), seen at ``now``."""
    if previous <= 0.0:
        return 0.0
    return previous * math.exp(-max(0.0, now - last_used) / USE_DECAY_SECONDS)


def keep_value(resident: Resident) -> float:
    """Higher means more worth keeping; victims are taken lowest first."""
    size = max(1, resident.host_bytes + resident.device_bytes)
    return (1.0 + resident.recent_uses) * (resident.reload_seconds + 0.1) / size


def plan_admission(
    host_needed: int,
    device_needed: int,
    residents: Sequence[Resident],
    budget: MemoryBudget,
    *,
    reserved_host: int = 0,
    reserved_device: int = 0,
) -> AdmissionPlan:
    """Decide which residents to evict so a newcomer of the given size fits.

    ``residents`` are every version holding memory (evictable or not);
    ``reserved_*`` is memory held outside them (abandoned loads still running).
    Raises ``Unavailable`` (``insufficient_memory``) when it cannot fit.
    """
    used_host = reserved_host + sum(r.host_bytes for r in residents)
    used_device = reserved_device + sum(r.device_bytes for r in residents)
    host_excess = _excess(budget.host_bytes, used_host, host_needed)
    device_excess = _excess(budget.device_bytes, used_device, device_needed)
    if host_excess <= 0 and device_excess <= 0:
        return AdmissionPlan(evict=())

    victims: list[VersionKey] = []
    for resident in sorted((r for r in residents if r.evictable), key=keep_value):
        if host_excess <= 0 and device_excess <= 0:
            break
        # A victim must free something that is short; evicting others only wastes work.
        if (host_excess > 0 and resident.host_bytes > 0) or (
            device_excess > 0 and resident.device_bytes > 0
        ):
            victims.append(resident.key)
            host_excess -= resident.host_bytes
            device_excess -= resident.device_bytes
    if host_excess > 0 or device_excess > 0:
        _refuse(host_needed, device_needed, used_host, used_device, budget, residents)
    return AdmissionPlan(evict=tuple(victims))


def _excess(limit: int | None, used: int, needed: int) -> int:
    return 0 if limit is None else used + needed - limit


def _refuse(
    host_needed: int,
    device_needed: int,
    used_host: int,
    used_device: int,
    budget: MemoryBudget,
    residents: Iterable[Resident],
) -> None:
    residents = list(residents)
    held = [str(r.key) for r in residents if not r.evictable]
    if budget.host_bytes is not None and used_host + host_needed > budget.host_bytes:
        kind, needed, used, limit = "host", host_needed, used_host, budget.host_bytes
        freeable = sum(r.host_bytes for r in residents if r.evictable)
    else:
        kind, needed, used, limit = "device", device_needed, used_device, budget.device_bytes or 0
        freeable = sum(r.device_bytes for r in residents if r.evictable)
    detail = f" (held by pinned, busy or loading versions: {', '.join(held)})" if held else ""
    raise Unavailable(
        f"not enough {kind} memory: the version needs {needed} bytes of a {limit}-byte "
        f"budget; {used} are in use and only {freeable} could be freed{detail}",
        code="insufficient_memory",
        memory=kind,
        needed_bytes=needed,
        budget_bytes=limit,
        used_bytes=used,
    )
