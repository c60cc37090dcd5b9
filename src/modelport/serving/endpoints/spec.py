"""Deployment specs: the rules a spec must follow on its own, its JSON form, its weights.

Pure functions. ``check_spec`` raises ``InvalidInput`` naming the field at fault;
what needs the registry or the host (approval, blobs, schemas, memory) is checked
by ``modelport.serving.endpoints.service``.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from modelport.errors import InvalidInput
from modelport.runtime.types import Priority
from modelport.serving.endpoints.types import (
    CanaryPolicy,
    DeploymentSpec,
    Resources,
    RolloutKind,
    RolloutPolicy,
    VersionWeight,
)

ENDPOINT_NAME_RE = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")
RESERVED_ENDPOINT_NAMES = frozenset({"stats"})
"""Names a ``/v2/models/{name}`` route takes for itself (Triton's ``/v2/models/stats``)."""
MAX_VERSIONS = 8
MAX_DEADLINE_MS = 3_600_000
MAX_BACKENDS = 8


def check_endpoint_name(name: str) -> None:
    if not ENDPOINT_NAME_RE.match(name):
        raise InvalidInput(
            "endpoint name must be 1-63 lowercase letters, digits and '-', starting and ending "
            "with a letter or digit",
            code="invalid_endpoint_name",
            field="name",
        )
    if name in RESERVED_ENDPOINT_NAMES:
        raise InvalidInput(
            f"endpoint name {name!r} is reserved: /v2/models/{name} is a route of its own",
            code="invalid_endpoint_name",
            field="name",
        )


def check_endpoint_settings(deadline_ms: int, priority: str) -> Priority:
    if not 1 <= deadline_ms <= MAX_DEADLINE_MS:
        raise InvalidInput(
            f"deadline_ms must be between 1 and {MAX_DEADLINE_MS}",
            code="invalid_deadline",
            field="deadline_ms",
        )
    try:
        return Priority(priority)
    except ValueError:
        raise InvalidInput(
            "priority must be 'interactive', 'batch' or 'offline'",
            code="invalid_priority",
            field="priority",
        ) from None


def check_spec(spec: DeploymentSpec) -> None:
    """Raise ``invalid_deployment`` unless the spec makes sense on its own."""
    versions = spec.versions
    if not 1 <= len(versions) <= MAX_VERSIONS:
        _bad(f"a deployment has 1 to {MAX_VERSIONS} versions", "versions")
    refs = [v.ref for v in spec.all_versions()]
    duplicate = next((r for r in refs if refs.count(r) > 1), None)
    if duplicate is not None:
        _bad(f"{duplicate} is listed twice (the shadow must not also take traffic)", "versions")
    resources = spec.resources
    if (
        resources.min_replicas < 0
        or resources.max_replicas < 1
        or resources.max_replicas < resources.min_replicas
    ):
        _bad("replicas: 0 <= min_replicas <= max_replicas, 1 <= max_replicas", "resources")
    if resources.memory_bytes is not None and resources.memory_bytes <= 0:
        _bad("resources.memory_bytes must be positive", "resources.memory_bytes")
    for index, version in enumerate(versions):
        names = version.backends
        if not 1 <= len(names) <= MAX_BACKENDS or len(set(names)) != len(names):
            _bad(
                f"a version has 1 to {MAX_BACKENDS} distinct backends",
                f"versions.{index}.backends",
            )
    if spec.shadow is not None and spec.shadow.remote_only:
        _bad("the shadow runs on the local host", "shadow")
    if spec.rollout.kind is RolloutKind.CANARY:
        _check_canary(spec)
        return
    for index, version in enumerate(versions):
        if not 0 <= version.weight <= 100:
            _bad("weights are between 0 and 100", f"versions.{index}.weight")
    if sum(v.weight for v in versions) != 100:
        _bad("the weights of a deployment's versions add up to 100", "versions")


def _check_canary(spec: DeploymentSpec) -> None:
    canary = spec.rollout.canary
    if len(spec.versions) != 2 or canary is None:
        _bad(
            "a canary rollout has exactly two versions: the stable, then the candidate", "versions"
        )
    assert canary is not None
    steps = canary.steps
    if not steps or steps[-1] != 100 or any(not 0 < s <= 100 for s in steps):
        _bad("canary steps are shares between 1 and 100, the last one 100", "rollout.steps")
    if any(b <= a for a, b in itertools.pairwise(steps)):
        _bad("canary steps must increase", "rollout.steps")
    if canary.interval_seconds <= 0 or canary.check_seconds <= 0:
        _bad("canary intervals must be positive", "rollout.interval_seconds")
    if canary.min_requests < 1:
        _bad("rollout.min_requests must be at least 1", "rollout.min_requests")
    margins = (canary.max_error_rate_increase, canary.max_p99_increase, canary.latency_slack_ms)
    if min(margins) < 0:
        _bad("canary margins must not be negative", "rollout")


def _bad(message: str, field: str) -> None:
    raise InvalidInput(message, code="invalid_deployment", field=field)


def initial_weights(spec: DeploymentSpec) -> tuple[int, ...]:
    """The shares the deployment starts with when it becomes active."""
    if spec.rollout.kind is RolloutKind.CANARY:
        assert spec.rollout.canary is not None
        return canary_weights(spec.rollout.canary.steps[0])
    return tuple(v.weight for v in spec.versions)


def canary_weights(candidate: int) -> tuple[int, int]:
    """(stable, candidate) shares for a candidate share."""
    return (100 - candidate, candidate)


# ---- JSON (stored in the database and shown on the API)
def spec_to_json(spec: DeploymentSpec) -> dict[str, Any]:
    body: dict[str, Any] = {
        "versions": [{**asdict(v), "backends": list(v.backends)} for v in spec.versions],
        "shadow": None
        if spec.shadow is None
        else {"model": spec.shadow.model, "version": spec.shadow.version},
        "resources": asdict(spec.resources),
        "rollout": {"policy": spec.rollout.kind.value},
    }
    if spec.rollout.canary is not None:
        canary = asdict(spec.rollout.canary)
        canary["steps"] = list(spec.rollout.canary.steps)
        body["rollout"].update(canary)
    return body


def _version_from_json(data: Mapping[str, Any]) -> VersionWeight:
    # Specs stored before backends existed ran on the local host.
    backends = tuple(data.get("backends") or ("local",))
    return VersionWeight(data["model"], data["version"], data.get("weight", 0), backends)


def spec_from_json(data: Mapping[str, Any]) -> DeploymentSpec:
    rollout = dict(data.get("rollout") or {})
    kind = RolloutKind(rollout.pop("policy", RolloutKind.MANUAL.value))
    canary = None
    if kind is RolloutKind.CANARY:
        if "steps" in rollout:
            rollout["steps"] = tuple(int(s) for s in rollout["steps"])
        canary = CanaryPolicy(**rollout)
    shadow = data.get("shadow")
    return DeploymentSpec(
        versions=tuple(_version_from_json(v) for v in data["versions"]),
        shadow=None if shadow is None else VersionWeight(shadow["model"], shadow["version"]),
        resources=Resources(**(data.get("resources") or {})),
        rollout=RolloutPolicy(kind, canary),
    )
