"""Plain records of endpoints and deployments (frozen, no I/O)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from modelport.observability.slo import SLO
from modelport.observability.types import LogPolicy
from modelport.runtime.types import Priority
from modelport.serving.types import FallbackChain
from modelport.tenancy.types import Tier

FALLBACK_REF = r"^[a-z0-9][a-z0-9._-]*/[a-z0-9][a-z0-9._-]*(:[A-Za-z0-9][A-Za-z0-9._-]{0,63})?$"
"""``owner/name`` or ``owner/name:version``."""


class DegradePolicy(BaseModel):
    """An endpoint's degradation under load (``inference.degrade``): each part left
    unset (None) is the installation's (``MODELPORT_DEGRADE_*``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = Field(default=True, description="False: the endpoint's calls never degrade")
    queue_wait_seconds: float | None = Field(
        default=None, gt=0, le=3600, description="Predicted queue wait above which calls give way"
    )
    fallback: str | None = Field(
        default=None,
        pattern=FALLBACK_REF,
        description="owner/name[:version] that serves the calls that give way (else shed)",
    )
    priorities: list[Priority] | None = Field(
        default=None, max_length=3, description="Priorities whose calls give way"
    )
    tiers: list[Tier] | None = Field(
        default=None, max_length=3, description="Tenant tiers whose calls give way"
    )


@dataclass(frozen=True)
class Endpoint:
    """A stable name owned by a tenant; callers reach whatever its active deployment serves."""

    name: str
    tenant: str
    deadline_ms: int
    """Longest a prediction may take, unless the caller asks for less."""
    priority: Priority
    """Scheduling class of its predictions: ``interactive`` or ``batch``."""
    description: str
    active_deployment: int | None
    previous_deployment: int | None
    """The deployment the active one replaced, kept warm until ``rollback_until``."""
    rollback_until: datetime | None
    fallback: FallbackChain | None
    """What answers when the chosen version cannot."""
    log_policy: LogPolicy | None
    """What the prediction log keeps of its predictions beyond the audit fields."""
    revision: int
    """Bumped on every change that moves traffic (routers rebuild on change)."""
    created_at: datetime
    created_by: str
    slos: tuple[SLO, ...] = ()
    """Its service level objectives (``observability.slo``): what its alerts watch."""
    degradation: DegradePolicy | None = None
    """How its calls give way under load; None: the installation's policy."""


LOCAL_BACKEND = "local"
"""The backend name of this process's model host in a deployment's ``backends``."""


@dataclass(frozen=True)
class VersionWeight:
    """One version of a deployment and its share of the traffic (0-100)."""

    model: str
    """``owner/name``"""
    version: str
    weight: int = 0
    backends: tuple[str, ...] = ("local",)
    """Where it runs, in the order to try: ``local`` (this process's model host) and/or
    names of declared remote backends."""

    @property
    def ref(self) -> str:
        return f"{self.model}:{self.version}"

    @property
    def remote_only(self) -> bool:
        """Not loaded on the local host: served by remote backends alone."""
        return LOCAL_BACKEND not in self.backends


@dataclass(frozen=True)
class Resources:
    min_replicas: int = 1
    """Replicas kept however idle; 0: on the worker pool, a version nobody calls shrinks
    to none and its next call loads it."""
    max_replicas: int = 1
    """Replicas the pool's autoscaler may grow a version to."""
    memory_bytes: int | None = None
    """Host memory of one replica of one version; default the manifest's declaration or the
    format's estimate."""


class RolloutKind(StrEnum):
    MANUAL = "manual"
    """The weights given are applied as one atomic switch once every version is ready."""
    CANARY = "canary"
    """The candidate's share moves through ``steps`` while it behaves as well as the stable."""


@dataclass(frozen=True)
class CanaryPolicy:
    steps: tuple[int, ...] = (5, 25, 50, 100)
    """The candidate's share at each step; the last is 100 (the rollout completes there)."""
    interval_seconds: float = 300.0
    """Time spent at each step before moving on, if the candidate behaves."""
    check_seconds: float = 10.0
    """How often the candidate is judged during a step (a bad one halts at once)."""
    min_requests: int = 20
    """Requests the candidate must have answered in a step before it is judged."""
    max_error_rate_increase: float = 0.05
    """Halt when the candidate's error rate exceeds the stable's by more than this."""
    max_p99_increase: float = 0.5
    """Halt when the candidate's p99 latency exceeds the stable's by more than this
    fraction (0.5: 50 % slower) plus ``latency_slack_ms``."""
    latency_slack_ms: float = 5.0
    """p99 differences below this are noise, whatever the ratio (fast models, few samples)."""


@dataclass(frozen=True)
class RolloutPolicy:
    kind: RolloutKind = RolloutKind.MANUAL
    canary: CanaryPolicy | None = None


@dataclass(frozen=True)
class DeploymentSpec:
    """What to deploy. ``versions[0]`` is the stable version, the others candidates."""

    versions: tuple[VersionWeight, ...]
    shadow: VersionWeight | None = None
    """Gets a copy of every request it can take, off the request path; never answers."""
    resources: Resources = field(default_factory=Resources)
    rollout: RolloutPolicy = field(default_factory=RolloutPolicy)

    @property
    def stable(self) -> VersionWeight:
        return self.versions[0]

    def all_versions(self) -> tuple[VersionWeight, ...]:
        """The versions to load: those taking traffic, then the shadow."""
        return self.versions + ((self.shadow,) if self.shadow else ())


class DeploymentState(StrEnum):
    PENDING = "pending"
    """Created; its versions are being fetched, loaded and warmed up. No traffic yet."""
    ACTIVE = "active"
    """Serving the endpoint's traffic."""
    SUPERSEDED = "superseded"
    """Replaced by a newer deployment; kept warm until the rollback window closes."""
    RETIRED = "retired"
    """Replaced, and its rollback window closed."""
    ROLLED_BACK = "rolled_back"
    """Was active; the deployment before it was restored."""
    FAILED = "failed"
    """A version could not be loaded; traffic never moved to it."""

    @property
    def live(self) -> bool:
        """Holds (or is about to hold) memory."""
        return self in (DeploymentState.PENDING, DeploymentState.ACTIVE, DeploymentState.SUPERSEDED)


class RolloutStatus(StrEnum):
    WAITING = "waiting"
    """Not active yet."""
    MANUAL = "manual"
    """Weights as given, nothing moves them."""
    PROGRESSING = "progressing"
    COMPLETE = "complete"
    HALTED = "halted"
    """The candidate misbehaved: all traffic went back to the stable version."""


@dataclass(frozen=True)
class Rollout:
    """Where a deployment's rollout stands."""

    status: RolloutStatus
    step: int = 0
    """Index into the canary's steps."""
    reason: str = ""
    since: datetime | None = None
    """When it reached this status and step (activation, a canary's move or halt)."""


@dataclass(frozen=True)
class VersionProgress:
    """One version of a deployment as its load last reported (fetch, verify, load, warm-up)."""

    ref: str
    state: str
    """``pending``, ``loading``, ``ready``, ``failed``."""
    phases: dict[str, float] = field(default_factory=dict)
    cause: str | None = None
    memory_bytes: int = 0
    warm_up: str = ""


@dataclass(frozen=True)
class Deployment:
    id: int
    endpoint: str
    state: DeploymentState
    spec: DeploymentSpec
    weights: tuple[int, ...]
    """The share of ``spec.versions`` now, in order (a canary moves them)."""
    rollout: Rollout
    progress: tuple[VersionProgress, ...]
    cause: str
    created_at: datetime
    created_by: str
    activated_at: datetime | None
    ended_at: datetime | None


@dataclass(frozen=True)
class Stats:
    """One version's traffic in a window: what the canary judge compares."""

    requests: int = 0
    errors: int = 0
    p50: float = 0.0
    p99: float = 0.0
    """Seconds."""

    @property
    def error_rate(self) -> float:
        return self.errors / self.requests if self.requests else 0.0


@dataclass(frozen=True)
class ShadowStats:
    """How a shadow version compares with the versions that answered."""

    requests: int = 0
    errors: int = 0
    dropped: int = 0
    """Copies not sent because the shadow was at its in-flight bound."""
    disagreements: int = 0
    p50: float = 0.0
    p99: float = 0.0
    primary_p50: float = 0.0
    primary_p99: float = 0.0

    @property
    def disagreement_rate(self) -> float:
        compared = self.requests - self.errors
        return self.disagreements / compared if compared else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "errors": self.errors,
            "dropped": self.dropped,
            "disagreements": self.disagreements,
            "disagreement_rate": self.disagreement_rate,
            "latency_ms": {"p50": self.p50 * 1000, "p99": self.p99 * 1000},
            "primary_latency_ms": {"p50": self.primary_p50 * 1000, "p99": self.primary_p99 * 1000},
        }
