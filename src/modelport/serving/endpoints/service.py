"""The serving control plane's state: endpoints and deployments, validated and persisted.

Contract:

- ``create_endpoint`` (409 ``endpoint_exists``), ``get_endpoint`` (404
  ``endpoint_not_found``), ``list_endpoints``.
- ``create_deployment`` validates before anything changes, then records a
  ``pending`` deployment (the controller loads it and switches traffic):

  * every version (those taking traffic, the shadow, the endpoint's fallback
    versions) exists and the endpoint's tenant may see it (404 as if absent);
  * it is ``approved`` or ``deployed`` (409 ``version_not_approved``);
  * its blobs are all stored with their declared sizes (422 ``blob_missing``);
    their digests are verified when the version is fetched, before it is ready;
  * its schema is compatible with the stable version's (422
    ``incompatible_schema``, see ``compat``);
  * the placement (the local host's memory budget; none on a gateway) holds every
    live deployment's versions together with these (422 ``insufficient_memory``; 503
    ``role_lacks_service`` on a gateway for a version not on a remote backend), and the tenant's quota holds its live
    deployments' memory times their ``max_replicas`` (422 ``quota_exceeded``);
  * no other deployment of the endpoint is pending (409 ``deployment_in_progress``).

- ``activate`` / ``rollback`` / ``retire`` / ``fail`` / ``set_weights`` change one
  endpoint's traffic in one transaction under its row lock; each bumps the
  endpoint's ``revision`` so routers rebuild their snapshot.

Every method opens its own transaction(s) and blocks: call it from a worker thread.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import timedelta

from sqlalchemy import text
from sqlalchemy.orm import Session

from modelport.changes import ChangeBus, EndpointChanged, LocalChangeBus
from modelport.clock import Clock
from modelport.errors import Conflict, InvalidInput, NotFound, Unprocessable
from modelport.observability.slo import SLO, check_slos
from modelport.observability.types import LogPolicy
from modelport.registry.service import RegistryService
from modelport.registry.types import LifecycleState, ModelVersion
from modelport.runtime.cache import BlobSource
from modelport.runtime.types import Priority
from modelport.serving.endpoints import repository as repo
from modelport.serving.endpoints.compat import incompatibilities
from modelport.serving.endpoints.spec import (
    check_endpoint_name,
    check_endpoint_settings,
    check_spec,
    initial_weights,
)
from modelport.serving.endpoints.types import (
    LOCAL_BACKEND,
    DegradePolicy,
    Deployment,
    DeploymentSpec,
    DeploymentState,
    Endpoint,
    Rollout,
    RolloutKind,
    RolloutStatus,
    VersionProgress,
    VersionWeight,
)
from modelport.serving.fallback import schema_problems, static_outputs
from modelport.serving.placement import Placement
from modelport.serving.routing.table import Route
from modelport.serving.types import FallbackChain, StaticFallback, VersionFallback, VersionRef
from modelport.store import Database
from modelport.tenancy.access import tenant_sees
from modelport.tenancy.types import GrantSet

DEPLOYABLE = (LifecycleState.APPROVED, LifecycleState.DEPLOYED)
LIVE = tuple(s for s in DeploymentState if s.live)


_ADMISSION = text("SELECT pg_advisory_xact_lock(7426002)")
"""Deployment creations take turns on PostgreSQL (a SQLite transaction writes alone)."""
_ADMISSION_TRIES = 5
_ONE_SNAPSHOT = text("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")


@dataclass(frozen=True)
class ServingLimits:
    """The control plane's settings."""

    rollback_window_seconds: float = 3600.0
    tenant_memory_bytes: int | None = None
    """What one tenant's live deployments may take together (memory times max_replicas)."""


@dataclass(frozen=True)
class Activation:
    endpoint: Endpoint
    deployment: Deployment
    retired: tuple[Deployment, ...]
    """Deployments that lost their warm standby by this switch (their versions may go)."""


@dataclass(frozen=True)
class _LiveDeployment:
    deployment: Deployment
    endpoint_tenant: str


def version_ref(found: ModelVersion) -> VersionRef:
    return VersionRef(
        model=found.model_ref,
        version=found.version,
        manifest_digest=found.manifest_digest,
        manifest=found.manifest,
    )


def fallback_versions(chain: FallbackChain | None) -> tuple[VersionWeight, ...]:
    if chain is None:
        return ()
    return tuple(
        VersionWeight(step.model, step.version)
        for step in chain.steps
        if isinstance(step, VersionFallback)
    )


class EndpointService:
    def __init__(
        self,
        database: Database,
        registry: RegistryService,
        blobs: BlobSource,
        placement: Placement,
        *,
        grants_to: Callable[[str], GrantSet],
        clock: Clock,
        limits: ServingLimits = ServingLimits(),
        backend_tenant: Callable[[str], str | None] = lambda name: None,
        changes: ChangeBus | None = None,
    ) -> None:
        """``backend_tenant(name)``: the tenant owning a declared remote backend (None:
        no such backend)."""
        self.database = database
        self.registry = registry
        self.blobs = blobs
        self.placement = placement
        self.grants_to = grants_to
        self.clock = clock
        self.limits = limits
        self.backend_tenant = backend_tenant
        # Told after each commit that changes what an endpoint serves or deploys.
        self.changes: ChangeBus = changes or LocalChangeBus()

    # ---- endpoints
    def create_endpoint(
        self,
        tenant: str,
        name: str,
        *,
        actor: str,
        deadline_ms: int = 30_000,
        priority: str = Priority.INTERACTIVE.value,
        description: str = "",
        fallback: FallbackChain | None = None,
        log_policy: LogPolicy | None = None,
        slos: Sequence[SLO] = (),
    ) -> Endpoint:
        check_endpoint_name(name)
        level = check_endpoint_settings(deadline_ms, priority)
        checked = check_slos(slos)
        for step in fallback_versions(fallback):
            self._resolve(
                tenant, step
            )  # exists and visible; compatibility is checked per deployment
        with self.database.transaction() as session:
            created = repo.insert_endpoint(
                session,
                name=name,
                tenant=tenant,
                deadline_ms=deadline_ms,
                priority=level,
                description=description,
                fallback=fallback,
                log_policy=log_policy,
                actor=actor,
                slos=checked,
            )
        self._changed(name)
        return created

    def set_slos(self, name: str, slos: Sequence[SLO]) -> Endpoint:
        """Replace the endpoint's SLOs (``invalid_slo`` for one that makes no sense)."""
        checked = check_slos(slos)
        with self.database.transaction() as session:
            return repo.set_slos(session, name, checked)

    def set_degradation(self, name: str, policy: DegradePolicy | None) -> Endpoint:
        """Replace the endpoint's degradation policy (None: the installation's). Its
        fallback must be a model the endpoint's owner may call, else
        ``degrade_fallback_not_callable`` (what one that does not exist gives too)."""
        endpoint = self.get_endpoint(name)
        if policy is not None and policy.fallback is not None:
            self._check_degrade_fallback(endpoint.tenant, policy.fallback)
        with self.database.transaction() as session:
            changed = repo.set_degradation(session, name, policy)
        self._changed(name)  # routes carry the endpoint: every process rebuilds its own
        return changed

    def _check_degrade_fallback(self, tenant: str, fallback: str) -> None:
        owner, _, rest = fallback.partition("/")
        model, _, version = rest.partition(":")
        refused = InvalidInput(
            f"{fallback} is not a model the endpoint's owner may call",
            code="degrade_fallback_not_callable",
            fallback=fallback,
        )
        try:
            found = self.registry.get_model(owner, model)
            if owner != tenant:
                visibility = found.visibility.value
                grants = self.grants_to(tenant) if visibility != "public" else None
                if not tenant_sees(tenant, owner, model, visibility, grants):
                    raise refused
            if version:
                self.registry.get_version(owner, model, version)
        except NotFound:
            raise refused from None

    def _changed(self, name: str) -> None:
        self.changes.publish(EndpointChanged(name))

    def get_endpoint(self, name: str) -> Endpoint:
        with self.database.transaction() as session:
            return repo.get_endpoint(session, name)

    def list_endpoints(self, tenant: str | None) -> list[Endpoint]:
        with self.database.transaction() as session:
            return repo.list_endpoints(session, tenant)

    # ---- deployments: validation and creation
    def create_deployment(self, name: str, spec: DeploymentSpec, *, actor: str) -> Deployment:
        """Validate ``spec`` for endpoint ``name`` and record it as pending."""
        endpoint = self.get_endpoint(name)
        check_spec(spec)
        self._check_backends(endpoint, spec)
        resolved = self._check_versions(endpoint, spec)
        progress = [VersionProgress(ref=r, state="pending") for r in resolved]
        for _ in range(_ADMISSION_TRIES):
            checked = self._check_memory(endpoint, spec, resolved)
            with self.database.transaction() as session:
                # Creations take turns, and each inserts only if no live deployment
                # appeared since its memory check (another gateway's, in between):
                # otherwise two that each fit alone could both land over the budget.
                if self.database.dialect == "postgresql":
                    session.execute(_ADMISSION)
                created = None
                if {d.id for d in repo.deployments_in(session, LIVE)} <= checked:
                    created = repo.insert_deployment(
                        session,
                        name,
                        spec,
                        weights=[0] * len(spec.versions),
                        progress=progress,
                        actor=actor,
                    )
            if created is not None:
                self._changed(name)  # every process rolls a pending deployment out
                return created
        raise Conflict(
            "deployments are being created faster than they can be checked; try again",
            code="deployment_in_progress",
            retry_after=1,
        )

    def _check_backends(self, endpoint: Endpoint, spec: DeploymentSpec) -> None:
        """400 ``unknown_backend`` for a name that is not one of the tenant's backends."""
        for index, version in enumerate(spec.versions):
            for name in version.backends:
                if name != LOCAL_BACKEND and self.backend_tenant(name) != endpoint.tenant:
                    raise InvalidInput(
                        f"backend {name!r} not found",
                        code="unknown_backend",
                        field=f"versions.{index}.backends",
                        backend=name,
                    )

    def _resolve(self, tenant: str, wanted: VersionWeight) -> ModelVersion:
        owner, _, model = wanted.model.partition("/")
        found = self.registry.get_version(owner, model, wanted.version)
        if owner != tenant:
            visibility = self.registry.get_model(owner, model).visibility.value
            grants = self.grants_to(tenant) if visibility != "public" else None
            if not tenant_sees(tenant, owner, model, visibility, grants):
                # Exactly what a version that does not exist gives.
                raise NotFound(
                    f"model {wanted.model} not found", code="model_not_found", model=wanted.model
                )
        return found

    def _check_versions(self, endpoint: Endpoint, spec: DeploymentSpec) -> dict[str, ModelVersion]:
        wanted = [*spec.all_versions(), *fallback_versions(endpoint.fallback)]
        resolved: dict[str, ModelVersion] = {}
        for item in wanted:
            if item.ref in resolved:
                continue
            found = self._resolve(endpoint.tenant, item)
            if found.state not in DEPLOYABLE:
                raise Conflict(
                    f"{found.ref} is {found.state.value}; only approved versions are deployed",
                    code="version_not_approved",
                    version=found.ref,
                    state=found.state.value,
                )
            # 422 signature_*: unsigned, altered, or not by a trusted publisher.
            self.registry.verify_signed(found.owner, found.name, found.version)
            self._check_blobs(found)
            resolved[item.ref] = found
        stable = resolved[spec.stable.ref].manifest
        fallbacks = {v.ref for v in fallback_versions(endpoint.fallback)}
        traffic = {v.ref for v in spec.all_versions()}
        for ref, found in resolved.items():
            if ref == spec.stable.ref:
                continue
            problems = []
            if ref in traffic:
                problems += incompatibilities(
                    stable.inputs, stable.outputs, found.manifest.inputs, found.manifest.outputs
                )
            if ref in fallbacks:
                problems += schema_problems(stable, found.manifest)
            if problems:
                raise Unprocessable(
                    f"{found.ref} cannot stand in for {spec.stable.ref}: " + "; ".join(problems),
                    code="incompatible_schema",
                    version=found.ref,
                    problems=problems,
                )
        for step in endpoint.fallback.steps if endpoint.fallback else ():
            if isinstance(step, StaticFallback):
                static_outputs(stable, step.outputs)  # 422 incompatible_fallback
        return resolved

    def _check_blobs(self, found: ModelVersion) -> None:
        for entry in found.manifest.files:
            stored = self.blobs.size(entry.digest)
            if stored != entry.size:
                what = (
                    "is not stored" if stored is None else f"has {stored} bytes, not {entry.size}"
                )
                raise Unprocessable(
                    f"{found.ref}: file {entry.path!r} (blob {entry.digest}) {what}",
                    code="blob_missing",
                    version=found.ref,
                    digest=entry.digest,
                )

    def memory_of(self, found: ModelVersion | VersionRef, spec: DeploymentSpec) -> int:
        """Host bytes one replica of a version of this deployment takes."""
        if spec.resources.memory_bytes is not None:
            return spec.resources.memory_bytes
        manifest = found.manifest
        declared = manifest.resources.host_memory_bytes
        return declared if declared is not None else self.placement.estimate(manifest)

    def _check_memory(
        self, endpoint: Endpoint, spec: DeploymentSpec, resolved: dict[str, ModelVersion]
    ) -> set[int]:
        """Refuse a deployment the host budget or the tenant's quota cannot take beside the
        live ones; the ids of the live deployments it was checked against."""
        # Versions served by remote backends alone take no memory here.
        remote = {v.ref for v in spec.versions if v.remote_only}
        mine = {
            ref: self.memory_of(found, spec) for ref, found in resolved.items() if ref not in remote
        }
        host_held: dict[str, int] = {}
        tenant_bytes = 0
        live = self._live()
        for other in live:
            refs = self._memory_refs(other.deployment)
            for ref, size in refs.items():
                host_held[ref] = max(host_held.get(ref, 0), size)
            if other.endpoint_tenant == endpoint.tenant:
                tenant_bytes += sum(refs.values()) * other.deployment.spec.resources.max_replicas
        # The host holds each version once, whichever deployments share it.
        for ref, size in mine.items():
            host_held[ref] = max(size, host_held.get(ref, 0))
        self.placement.fits(sum(host_held.values()), list(mine))
        quota = self.limits.tenant_memory_bytes
        asked = sum(mine.values()) * spec.resources.max_replicas
        if quota is not None and tenant_bytes + asked > quota:
            raise Unprocessable(
                f"tenant {endpoint.tenant}'s deployments would take {tenant_bytes + asked} bytes; "
                f"its quota is {quota}",
                code="quota_exceeded",
                needed_bytes=tenant_bytes + asked,
                quota_bytes=quota,
            )
        return {other.deployment.id for other in live}

    def _live(self) -> list[_LiveDeployment]:
        with self.database.transaction() as session:
            deployments = repo.deployments_in(session, LIVE)
            tenants = {e.name: e.tenant for e in repo.list_endpoints(session, None)}
        return [_LiveDeployment(d, tenants[d.endpoint]) for d in deployments]

    def _memory_refs(self, deployment: Deployment) -> dict[str, int]:
        """Each version a live deployment holds, and the memory its spec reserves for it.

        Reservations, not measurements: what the host measures around a load (an RSS
        delta) is noise for small models, and admission by the host uses it anyway."""
        sizes: dict[str, int] = {}
        remote = {v.ref for v in deployment.spec.versions if v.remote_only}
        for progress in deployment.progress:
            if progress.ref in remote:
                continue
            try:
                sizes[progress.ref] = self.memory_of(self._version(progress.ref), deployment.spec)
            except NotFound:
                sizes[progress.ref] = 0
        return sizes

    def _version(self, ref: str) -> ModelVersion:
        model, _, version = ref.rpartition(":")
        owner, _, name = model.partition("/")
        return self.registry.get_version(owner, name, version)

    # ---- deployments: reads
    def get_deployment(self, name: str, deployment: int) -> Deployment:
        with self.database.transaction() as session:
            return repo.get_deployment(session, name, deployment)

    def list_deployments(self, name: str) -> list[Deployment]:
        with self.database.transaction() as session:
            return repo.list_deployments(session, name)

    def deployments_in(self, states: Iterable[DeploymentState]) -> list[Deployment]:
        with self.database.transaction() as session:
            return repo.deployments_in(session, tuple(states))

    def version_refs(self, deployment: Deployment) -> list[VersionRef]:
        """Every version the deployment loads: its progress entries, in order."""
        return [version_ref(self._version(p.ref)) for p in deployment.progress]

    def live_refs(self) -> set[str]:
        """Versions some live deployment of any endpoint holds."""
        return {p.ref for d in self.deployments_in(LIVE) for p in d.progress}

    def replica_bounds(self) -> dict[str, tuple[int, int]]:
        """Each version live deployments hold, with the widest of their
        ``(min_replicas, max_replicas)``: what an autoscaler may give it."""
        return replica_bounds(self.deployments_in(LIVE))

    # ---- traffic changes
    def record_progress(
        self, name: str, deployment: int, progress: list[VersionProgress]
    ) -> Deployment | None:
        """Record a rollout's load progress while the deployment is pending; None, and
        nothing written, once it is not (another process activated or failed it)."""
        with self.database.transaction() as session:
            repo.get_endpoint(session, name, lock=True)
            if repo.get_deployment(session, name, deployment).state is not DeploymentState.PENDING:
                return None
            return repo.update_deployment(session, name, deployment, progress=progress)

    def fail(
        self, name: str, deployment: int, cause: str, progress: list[VersionProgress]
    ) -> Deployment | None:
        """Fail a pending deployment; None, and nothing written, when it is not pending any
        more: every process rolls out a pending deployment, and one whose load failed
        must not fail the deployment another process activated meanwhile."""
        with self.database.transaction() as session:
            repo.get_endpoint(session, name, lock=True)
            if repo.get_deployment(session, name, deployment).state is not DeploymentState.PENDING:
                return None
            failed = repo.update_deployment(
                session,
                name,
                deployment,
                state=DeploymentState.FAILED,
                cause=cause,
                progress=progress,
                ended_at=self.clock.now(),
            )
        self._changed(name)
        return failed

    def activate(
        self, name: str, deployment: int, progress: list[VersionProgress]
    ) -> Activation | None:
        """Switch the endpoint to ``deployment`` (pending → active) atomically; None if it
        is no longer pending."""
        now = self.clock.now()
        with self.database.transaction() as session:
            endpoint = repo.get_endpoint(session, name, lock=True)
            current = repo.get_deployment(session, name, deployment)
            if current.state is not DeploymentState.PENDING:
                return None
            retired = []
            older = endpoint.previous_deployment
            superseded = DeploymentState.SUPERSEDED
            if older is not None and repo.get_deployment(session, name, older).state is superseded:
                retired.append(
                    repo.update_deployment(
                        session, name, older, state=DeploymentState.RETIRED, ended_at=now
                    )
                )
            if endpoint.active_deployment is not None:
                repo.update_deployment(
                    session, name, endpoint.active_deployment, state=DeploymentState.SUPERSEDED
                )
            canary = current.spec.rollout.kind is RolloutKind.CANARY
            activated = repo.update_deployment(
                session,
                name,
                deployment,
                state=DeploymentState.ACTIVE,
                weights=initial_weights(current.spec),
                rollout=Rollout(
                    RolloutStatus.PROGRESSING if canary else RolloutStatus.MANUAL, since=now
                ),
                progress=progress,
                activated_at=now,
            )
            previous = endpoint.active_deployment
            window = timedelta(seconds=self.limits.rollback_window_seconds)
            switched = repo.switch(
                session,
                name,
                active=deployment,
                previous=previous,
                rollback_until=now + window if previous is not None else None,
            )
        self._changed(name)
        return Activation(switched, activated, tuple(retired))

    def set_weights(
        self,
        name: str,
        deployment: int,
        weights: tuple[int, ...],
        rollout: Rollout,
        *,
        from_step: int | None = None,
    ) -> Deployment | None:
        """Move an active canary's shares (a step or a halt); None, and nothing changed,
        when the deployment is not active, its canary is not progressing any more, or
        (with ``from_step``) it is not at that step: another controller moved it first.
        Every process resumes a running canary, so each move is made once, by
        whichever controller decides first."""
        with self.database.transaction() as session:
            endpoint = repo.get_endpoint(session, name, lock=True)
            if endpoint.active_deployment != deployment:
                return None
            current = repo.get_deployment(session, name, deployment).rollout
            if current.status is not RolloutStatus.PROGRESSING:
                return None
            if from_step is not None and current.step != from_step:
                return None
            updated = repo.update_deployment(
                session,
                name,
                deployment,
                weights=weights,
                rollout=replace(rollout, since=rollout.since or self.clock.now()),
            )
            repo.touch(session, name)
        self._changed(name)
        return updated

    def running_canary(self, name: str) -> tuple[int, int, str] | None:
        """``(deployment, step, candidate ref)`` of the endpoint's canary while it
        progresses; None otherwise."""
        endpoint = self.get_endpoint(name)
        if endpoint.active_deployment is None:
            return None
        deployment = self.get_deployment(name, endpoint.active_deployment)
        if deployment.rollout.status is not RolloutStatus.PROGRESSING:
            return None
        if len(deployment.spec.versions) < 2:
            return None
        return deployment.id, deployment.rollout.step, deployment.spec.versions[1].ref

    def halt_canary(self, name: str, deployment: int, step: int, reason: str) -> bool:
        """Send all traffic back to the stable version, as the canary judge halts it;
        False when the canary moved or ended meanwhile."""
        halted = Rollout(RolloutStatus.HALTED, step, reason)
        return self.set_weights(name, deployment, (100, 0), halted, from_step=step) is not None

    def rollback(self, name: str, deployment: int) -> tuple[Endpoint, Deployment]:
        """Restore the deployment ``deployment`` replaced, at once (409 when it cannot be)."""
        now = self.clock.now()
        with self.database.transaction() as session:
            endpoint = repo.get_endpoint(session, name, lock=True)
            rolled = repo.get_deployment(session, name, deployment)
            if endpoint.active_deployment != deployment:
                raise Conflict(
                    f"deployment {deployment} is {rolled.state.value}, not the active one",
                    code="deployment_not_active",
                    state=rolled.state.value,
                )
            previous = endpoint.previous_deployment
            if previous is None:
                raise Conflict(
                    f"endpoint {name!r} has no earlier deployment to roll back to",
                    code="nothing_to_roll_back_to",
                )
            standby = repo.get_deployment(session, name, previous)
            closed = endpoint.rollback_until is None or endpoint.rollback_until <= now
            if closed or standby.state is not DeploymentState.SUPERSEDED:
                raise Conflict(
                    f"the rollback window of deployment {previous} closed at "
                    f"{endpoint.rollback_until}",
                    code="rollback_window_closed",
                )
            rolled = repo.update_deployment(
                session, name, deployment, state=DeploymentState.ROLLED_BACK, ended_at=now
            )
            repo.update_deployment(session, name, previous, state=DeploymentState.ACTIVE)
            switched = repo.switch(
                session, name, active=previous, previous=None, rollback_until=None
            )
        self._changed(name)
        return switched, rolled

    def retire(self, name: str, deployment: int) -> Deployment | None:
        """Close the rollback window of ``deployment`` if it is due; None if not (any more)."""
        now = self.clock.now()
        with self.database.transaction() as session:
            endpoint = repo.get_endpoint(session, name, lock=True)
            due = endpoint.rollback_until is not None and endpoint.rollback_until <= now
            if endpoint.previous_deployment != deployment or not due:
                return None
            if (
                repo.get_deployment(session, name, deployment).state
                is not DeploymentState.SUPERSEDED
            ):
                return None
            # The endpoint keeps pointing at it, with its closed window, so that a late
            # rollback is refused as such.
            retired = repo.update_deployment(
                session, name, deployment, state=DeploymentState.RETIRED, ended_at=now
            )
        self._changed(name)
        return retired

    # ---- routing snapshots
    def revision_mark(self) -> tuple[int, int]:
        with self.database.transaction() as session:
            return repo.revision_mark(session)

    def route(self, name: str) -> Route:
        """The endpoint's route as the database has it now."""
        with self.database.transaction() as session:
            self._snapshot(session)
            endpoint = repo.get_endpoint(session, name)
            active = (
                repo.get_deployment(session, name, endpoint.active_deployment)
                if endpoint.active_deployment is not None
                else None
            )
        return self._route(endpoint, active)

    def routes(self) -> dict[str, Route]:
        with self.database.transaction() as session:
            self._snapshot(session)
            endpoints = repo.list_endpoints(session, None)
            active = {d.endpoint: d for d in repo.deployments_in(session, [DeploymentState.ACTIVE])}
        return {e.name: self._route(e, active.get(e.name)) for e in endpoints}

    def _snapshot(self, session: Session) -> None:
        """Read the endpoints and their deployments from one snapshot: under PostgreSQL's
        default (each statement its own snapshot), an activation committed between the
        two reads gave an endpoint whose active deployment was not among those read, and
        so a route with none, at the current revision. (A SQLite transaction reads one
        snapshot already.)"""
        if self.database.dialect == "postgresql":
            session.execute(_ONE_SNAPSHOT)

    def _route(self, endpoint: Endpoint, active: Deployment | None) -> Route:
        if active is None or active.id != endpoint.active_deployment:
            return Route(endpoint=endpoint, deployment=None)
        spec = active.spec
        refs = {
            item.ref: version_ref(self._version(item.ref))
            for item in [*spec.all_versions(), *fallback_versions(endpoint.fallback)]
        }
        return Route(
            endpoint=endpoint,
            deployment=active.id,
            versions=tuple(refs[v.ref] for v in spec.versions),
            weights=active.weights,
            backends={v.ref: v.backends for v in spec.versions},
            shadow=refs[spec.shadow.ref] if spec.shadow else None,
            fallbacks={v.ref: refs[v.ref] for v in fallback_versions(endpoint.fallback)},
        )


def replica_bounds(deployments: Iterable[Deployment]) -> dict[str, tuple[int, int]]:
    """Each version ``deployments`` hold, with the widest of their ``(min_replicas,
    max_replicas)``."""
    bounds: dict[str, tuple[int, int]] = {}
    for deployment in deployments:
        resources = deployment.spec.resources
        refs = {p.ref for p in deployment.progress}
        refs.update(v.ref for v in deployment.spec.all_versions())
        for ref in refs:
            low, high = bounds.get(ref, (resources.min_replicas, resources.max_replicas))
            bounds[ref] = (max(low, resources.min_replicas), max(high, resources.max_replicas))
    return bounds
