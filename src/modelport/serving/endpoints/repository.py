"""Every query on endpoints and deployments. Rows stay here; callers get frozen records.

Functions take the caller's session and never commit: the service's transaction
is the boundary. ``lock=True`` takes the endpoint row's lock (``FOR UPDATE`` on
PostgreSQL; SQLite's ``BEGIN IMMEDIATE`` already serializes writers), so every
change of an endpoint's traffic is serialized.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from modelport.errors import Conflict, NotFound
from modelport.observability.slo import SLO
from modelport.observability.types import LogPolicy
from modelport.runtime.types import Priority
from modelport.serving.endpoints.errors import endpoint_not_found
from modelport.serving.endpoints.spec import spec_from_json, spec_to_json
from modelport.serving.endpoints.types import (
    DegradePolicy,
    Deployment,
    DeploymentSpec,
    DeploymentState,
    Endpoint,
    Rollout,
    RolloutStatus,
    VersionProgress,
)
from modelport.serving.types import FallbackChain
from modelport.store.base import is_row_id
from modelport.store.tables import DeploymentRow, EndpointRow


def deployment_not_found(name: str, deployment: int) -> NotFound:
    return NotFound(
        f"endpoint {name!r} has no deployment {deployment}",
        code="deployment_not_found",
        endpoint=name,
        deployment=deployment,
    )


# ---- endpoints
def insert_endpoint(
    session: Session,
    *,
    name: str,
    tenant: str,
    deadline_ms: int,
    priority: Priority,
    description: str,
    fallback: FallbackChain | None,
    log_policy: LogPolicy | None,
    actor: str,
    slos: Sequence[SLO] = (),
) -> Endpoint:
    row = EndpointRow(
        name=name,
        tenant=tenant,
        deadline_ms=deadline_ms,
        priority=priority.value,
        description=description,
        fallback=None if fallback is None else fallback.model_dump(mode="json"),
        log_policy=None if log_policy is None else log_policy.model_dump(mode="json"),
        slos=_slos_json(slos),
        revision=0,
        created_by=actor,
    )
    session.add(row)
    try:
        session.flush()
    except IntegrityError:
        raise Conflict(
            f"an endpoint named {name!r} already exists", code="endpoint_exists", endpoint=name
        ) from None
    return _endpoint(row)


def _endpoint_row(session: Session, name: str, *, lock: bool = False) -> EndpointRow:
    query = select(EndpointRow).where(EndpointRow.name == name)
    if lock:
        query = query.with_for_update()
    row = session.scalars(query).one_or_none()
    if row is None:
        raise endpoint_not_found(name)
    return row


def get_endpoint(session: Session, name: str, *, lock: bool = False) -> Endpoint:
    return _endpoint(_endpoint_row(session, name, lock=lock))


def list_endpoints(session: Session, tenant: str | None) -> list[Endpoint]:
    query = select(EndpointRow).order_by(EndpointRow.name)
    if tenant is not None:
        query = query.where(EndpointRow.tenant == tenant)
    return [_endpoint(row) for row in session.scalars(query)]


def revision_mark(session: Session) -> tuple[int, int]:
    """Changes whenever any endpoint's traffic changes (routers poll it to stay current)."""
    total, count = session.execute(
        select(func.coalesce(func.sum(EndpointRow.revision), 0), func.count(EndpointRow.id))
    ).one()
    return int(total), int(count)


def switch(
    session: Session,
    name: str,
    *,
    active: int | None,
    previous: int | None,
    rollback_until: datetime | None,
) -> Endpoint:
    """Point the endpoint at ``active`` (keeping ``previous`` warm until ``rollback_until``)."""
    row = _endpoint_row(session, name, lock=True)
    row.active_deployment_id = active
    row.previous_deployment_id = previous
    row.rollback_until = rollback_until
    row.revision += 1
    session.flush()
    return _endpoint(row)


def set_slos(session: Session, name: str, slos: Sequence[SLO]) -> Endpoint:
    """Replace the endpoint's SLOs (its traffic is unchanged: no revision)."""
    row = _endpoint_row(session, name, lock=True)
    row.slos = _slos_json(slos)
    session.flush()
    return _endpoint(row)


def set_degradation(session: Session, name: str, policy: DegradePolicy | None) -> Endpoint:
    """Replace the endpoint's degradation policy (None: the installation's): a new
    revision, since it moves traffic (routes carry it)."""
    row = _endpoint_row(session, name, lock=True)
    row.degradation = None if policy is None else policy.model_dump(mode="json")
    row.revision += 1
    session.flush()
    return _endpoint(row)


def _slos_json(slos: Sequence[SLO]) -> list[dict[str, Any]] | None:
    return [s.model_dump(mode="json") for s in slos] or None


def touch(session: Session, name: str) -> None:
    """Bump the revision: the active deployment's weights changed."""
    _endpoint_row(session, name, lock=True).revision += 1
    session.flush()


def _endpoint(row: EndpointRow) -> Endpoint:
    return Endpoint(
        name=row.name,
        tenant=row.tenant,
        deadline_ms=row.deadline_ms,
        priority=Priority(row.priority),
        description=row.description,
        active_deployment=row.active_deployment_id,
        previous_deployment=row.previous_deployment_id,
        rollback_until=row.rollback_until,
        fallback=None if row.fallback is None else FallbackChain.model_validate(row.fallback),
        log_policy=None if row.log_policy is None else LogPolicy.model_validate(row.log_policy),
        revision=row.revision,
        created_at=row.created_at,
        created_by=row.created_by,
        slos=tuple(SLO.model_validate(s) for s in row.slos or ()),
        degradation=None
        if row.degradation is None
        else DegradePolicy.model_validate(row.degradation),
    )


# ---- deployments
def insert_deployment(
    session: Session,
    endpoint: str,
    spec: DeploymentSpec,
    *,
    weights: Sequence[int],
    progress: Sequence[VersionProgress],
    actor: str,
) -> Deployment:
    endpoint_row = _endpoint_row(session, endpoint, lock=True)
    pending = session.scalar(
        select(DeploymentRow.id).where(
            DeploymentRow.endpoint_id == endpoint_row.id,
            DeploymentRow.state == DeploymentState.PENDING.value,
        )
    )
    if pending is not None:
        raise Conflict(
            f"deployment {pending} of endpoint {endpoint!r} is still being rolled out",
            code="deployment_in_progress",
            deployment=pending,
        )
    row = DeploymentRow(
        endpoint_id=endpoint_row.id,
        state=DeploymentState.PENDING.value,
        spec=spec_to_json(spec),
        weights=list(weights),
        rollout={"status": RolloutStatus.WAITING.value, "step": 0, "reason": ""},
        progress=[_progress_json(p) for p in progress],
        cause="",
        created_by=actor,
    )
    session.add(row)
    session.flush()
    return _deployment(row, endpoint)


def _deployment_row(session: Session, endpoint: str, deployment: int) -> tuple[DeploymentRow, str]:
    if not is_row_id(deployment):
        raise deployment_not_found(endpoint, deployment)
    row = session.execute(
        select(DeploymentRow, EndpointRow.name)
        .join(EndpointRow, EndpointRow.id == DeploymentRow.endpoint_id)
        .where(DeploymentRow.id == deployment, EndpointRow.name == endpoint)
    ).one_or_none()
    if row is None:
        raise deployment_not_found(endpoint, deployment)
    return row[0], row[1]


def get_deployment(session: Session, endpoint: str, deployment: int) -> Deployment:
    return _deployment(*_deployment_row(session, endpoint, deployment))


def list_deployments(session: Session, endpoint: str) -> list[Deployment]:
    endpoint_row = _endpoint_row(session, endpoint)
    rows = session.scalars(
        select(DeploymentRow)
        .where(DeploymentRow.endpoint_id == endpoint_row.id)
        .order_by(DeploymentRow.id.desc())
    )
    return [_deployment(row, endpoint) for row in rows]


def deployments_in(session: Session, states: Sequence[DeploymentState]) -> list[Deployment]:
    """Deployments of every endpoint in one of ``states`` (oldest first)."""
    rows = session.execute(
        select(DeploymentRow, EndpointRow.name)
        .join(EndpointRow, EndpointRow.id == DeploymentRow.endpoint_id)
        .where(DeploymentRow.state.in_([s.value for s in states]))
        .order_by(DeploymentRow.id)
    )
    return [_deployment(row, name) for row, name in rows]


def update_deployment(
    session: Session,
    endpoint: str,
    deployment: int,
    *,
    state: DeploymentState | None = None,
    weights: Sequence[int] | None = None,
    rollout: Rollout | None = None,
    progress: Sequence[VersionProgress] | None = None,
    cause: str | None = None,
    activated_at: datetime | None = None,
    ended_at: datetime | None = None,
) -> Deployment:
    row, _ = _deployment_row(session, endpoint, deployment)
    if state is not None:
        row.state = state.value
    if weights is not None:
        row.weights = list(weights)
    if rollout is not None:
        row.rollout = {
            "status": rollout.status.value,
            "step": rollout.step,
            "reason": rollout.reason,
            "since": None if rollout.since is None else rollout.since.isoformat(),
        }
    if progress is not None:
        row.progress = [_progress_json(p) for p in progress]
    if cause is not None:
        row.cause = cause
    if activated_at is not None:
        row.activated_at = activated_at
    if ended_at is not None:
        row.ended_at = ended_at
    session.flush()
    return _deployment(row, endpoint)


def _deployment(row: DeploymentRow, endpoint: str) -> Deployment:
    rollout = row.rollout or {}
    return Deployment(
        id=row.id,
        endpoint=endpoint,
        state=DeploymentState(row.state),
        spec=spec_from_json(row.spec),
        weights=tuple(int(w) for w in row.weights),
        rollout=Rollout(
            status=RolloutStatus(rollout.get("status", RolloutStatus.WAITING.value)),
            step=int(rollout.get("step", 0)),
            reason=str(rollout.get("reason", "")),
            since=_moment(rollout.get("since")),
        ),
        progress=tuple(_progress(p) for p in row.progress or []),
        cause=row.cause,
        created_at=row.created_at,
        created_by=row.created_by,
        activated_at=row.activated_at,
        ended_at=row.ended_at,
    )


def _moment(value: Any) -> datetime | None:
    """A stored ISO 8601 time (rollouts recorded before it was kept have none)."""
    return datetime.fromisoformat(value) if isinstance(value, str) else None


def _progress_json(progress: VersionProgress) -> dict[str, Any]:
    return {
        "ref": progress.ref,
        "state": progress.state,
        "phases": dict(progress.phases),
        "cause": progress.cause,
        "memory_bytes": progress.memory_bytes,
        "warm_up": progress.warm_up,
    }


def _progress(data: dict[str, Any]) -> VersionProgress:
    return VersionProgress(
        ref=data["ref"],
        state=data["state"],
        phases={str(k): float(v) for k, v in (data.get("phases") or {}).items()},
        cause=data.get("cause"),
        memory_bytes=int(data.get("memory_bytes") or 0),
        warm_up=str(data.get("warm_up") or ""),
    )
