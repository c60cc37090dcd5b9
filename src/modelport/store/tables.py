"""All tables. Rows never leave the store layer: repositories return frozen records."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
    false,
)
from sqlalchemy.orm import Mapped, mapped_column

from modelport.store.base import Base, utcnow

# ---- installation ------------------------------------------------------------


class InstallationRow(Base):
    """The one row naming this installation (made by its migration): what it shares
    with other installations, a Redis, it keeps under this id."""

    __tablename__ = "installation"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


# ---- blobs and uploads -------------------------------------------------------


class BlobRow(Base):
    """A committed, content-addressed blob (the bytes live in the blob store)."""

    __tablename__ = "blobs"

    digest: Mapped[str] = mapped_column(String(71), primary_key=True)
    size: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class UploadRow(Base):
    """A resumable upload in progress; its bytes stay in staging until committed."""

    __tablename__ = "uploads"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    offset: Mapped[int] = mapped_column(BigInteger, default=0)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(index=True)
    tenant: Mapped[str | None] = mapped_column(String(64), nullable=True, default=None)
    """The tenant that started the upload: its commit proves that tenant holds the bytes
    (None for the admin key, and for uploads started before this was recorded)."""


class BlobOwnerRow(Base):
    """A tenant that holds a blob's bytes: it uploaded them (a commit that hashed them to
    the digest), or a version of its own listed the blob when possession began to be
    recorded. Storage stays deduplicated; only this row is per tenant. Rows are never
    removed: having had the bytes once is what possession means."""

    __tablename__ = "blob_owners"

    digest: Mapped[str] = mapped_column(String(71), primary_key=True)
    tenant: Mapped[str] = mapped_column(String(64), primary_key=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


# ---- registry ----------------------------------------------------------------


class ModelRow(Base):
    __tablename__ = "models"
    __table_args__ = (UniqueConstraint("owner", "name"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    owner: Mapped[str] = mapped_column(String(64), index=True)
    name: Mapped[str] = mapped_column(String(128))
    task: Mapped[str] = mapped_column(String(64), default="", index=True)
    description: Mapped[str] = mapped_column(Text, default="")
    license: Mapped[str] = mapped_column(String(256), index=True)
    visibility: Mapped[str] = mapped_column(String(16), default="private")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    created_by: Mapped[str] = mapped_column(String(128), default="")


class ModelTagRow(Base):
    __tablename__ = "model_tags"

    model_id: Mapped[int] = mapped_column(ForeignKey("models.id"), primary_key=True)
    tag: Mapped[str] = mapped_column(String(64), primary_key=True, index=True)


class ModelVersionRow(Base):
    """An immutable, published version. Nothing in this row ever changes."""

    __tablename__ = "model_versions"
    __table_args__ = (
        UniqueConstraint("model_id", "version"),
        Index("ix_model_versions_format_model", "format", "model_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    model_id: Mapped[int] = mapped_column(ForeignKey("models.id"), index=True)
    version: Mapped[str] = mapped_column(String(64))
    manifest_digest: Mapped[str] = mapped_column(String(71), index=True)
    manifest: Mapped[str] = mapped_column(Text, doc="canonical manifest JSON")
    format: Mapped[str] = mapped_column(String(32))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    created_by: Mapped[str] = mapped_column(String(128), default="")


class VersionFileRow(Base):
    """A manifest's file entries, indexed so a blob's users can be found."""

    __tablename__ = "version_files"

    version_id: Mapped[int] = mapped_column(ForeignKey("model_versions.id"), primary_key=True)
    path: Mapped[str] = mapped_column(String(512), primary_key=True)
    digest: Mapped[str] = mapped_column(String(71), index=True)
    size: Mapped[int] = mapped_column(BigInteger)


class LineageEdgeRow(Base):
    """child was derived from parent (relation such as ``fine-tuned-from``)."""

    __tablename__ = "lineage_edges"

    child_id: Mapped[int] = mapped_column(ForeignKey("model_versions.id"), primary_key=True)
    parent_id: Mapped[int] = mapped_column(
        ForeignKey("model_versions.id"), primary_key=True, index=True
    )
    relation: Mapped[str] = mapped_column(String(64))


class LifecycleEventRow(Base):
    """An appended lifecycle transition; the latest one is the version's state."""

    __tablename__ = "lifecycle_events"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    version_id: Mapped[int] = mapped_column(ForeignKey("model_versions.id"), index=True)
    from_state: Mapped[str | None] = mapped_column(String(32))
    to_state: Mapped[str] = mapped_column(String(32))
    actor: Mapped[str] = mapped_column(String(128))
    reason: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class ValidationReportRow(Base):
    """The result of one validation run of a version (kept whether it passed or not)."""

    __tablename__ = "validation_reports"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    version_id: Mapped[int] = mapped_column(ForeignKey("model_versions.id"), index=True)
    passed: Mapped[bool]
    report: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class SignatureRow(Base):
    """An Ed25519 signature over a version's manifest digest."""

    __tablename__ = "signatures"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    version_id: Mapped[int] = mapped_column(ForeignKey("model_versions.id"), index=True)
    key_id: Mapped[str] = mapped_column(String(71))
    public_key: Mapped[bytes] = mapped_column(LargeBinary)
    signature: Mapped[bytes] = mapped_column(LargeBinary)
    signer: Mapped[str] = mapped_column(String(128))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class AliasRow(Base):
    """Where an alias points now; changed atomically, history kept apart."""

    __tablename__ = "aliases"

    model_id: Mapped[int] = mapped_column(ForeignKey("models.id"), primary_key=True)
    alias: Mapped[str] = mapped_column(String(64), primary_key=True)
    version_id: Mapped[int] = mapped_column(ForeignKey("model_versions.id"))
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)


class FormatDecisionRow(Base):
    """An operator's decision that versions of a format the platform does not run may
    be approved (the reason is kept; withdrawing it deletes the row, the audit log keeps
    both acts)."""

    __tablename__ = "format_decisions"

    format: Mapped[str] = mapped_column(String(32), primary_key=True)
    reason: Mapped[str] = mapped_column(Text)
    decided_by: Mapped[str] = mapped_column(String(128))
    decided_at: Mapped[datetime] = mapped_column(default=utcnow)


class AliasEventRow(Base):
    __tablename__ = "alias_events"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    model_id: Mapped[int] = mapped_column(ForeignKey("models.id"), index=True)
    alias: Mapped[str] = mapped_column(String(64))
    version_id: Mapped[int | None] = mapped_column(ForeignKey("model_versions.id"))
    previous_version_id: Mapped[int | None] = mapped_column(ForeignKey("model_versions.id"))
    actor: Mapped[str] = mapped_column(String(128))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


# ---- tenancy -----------------------------------------------------------------


class TenantRow(Base):
    """An organisation; its ``slug`` is also the model namespace it owns."""

    __tablename__ = "tenants"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    slug: Mapped[str] = mapped_column(String(64), unique=True)
    name: Mapped[str] = mapped_column(String(256), default="")
    require_separation: Mapped[bool] = mapped_column(default=False)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    created_by: Mapped[str] = mapped_column(String(128), default="")
    no_cache: Mapped[bool] = mapped_column(default=False, server_default=false())
    """Its calls are never answered from, nor stored in, the response cache."""
    shared_cache: Mapped[bool] = mapped_column(default=False, server_default=false())
    """It answers from, and adds to, the cache shared with other tenants that opted in."""
    suspended_at: Mapped[datetime | None]
    """Set while the operator has suspended it: its credentials are refused, its jobs held."""
    suspension_reason: Mapped[str] = mapped_column(String(256), default="", server_default="")
    tier: Mapped[str] = mapped_column(String(16), default="standard", server_default="standard")
    """``free``, ``standard`` or ``premium``: whose calls give way under load."""


class MemberRow(Base):
    """A member or service account of a tenant, with its roles there.

    Removing one sets ``removed_at`` (its keys are revoked); adding the name again
    brings the same principal back with new roles and no keys.
    """

    __tablename__ = "tenant_members"
    __table_args__ = (UniqueConstraint("tenant_id", "name"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    tenant_id: Mapped[int] = mapped_column(ForeignKey("tenants.id"), index=True)
    name: Mapped[str] = mapped_column(String(64))
    kind: Mapped[str] = mapped_column(String(16))
    roles: Mapped[list[str]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    created_by: Mapped[str] = mapped_column(String(128), default="")
    removed_at: Mapped[datetime | None]


class ApiKeyRow(Base):
    """An API key: only a hash of its secret is stored."""

    __tablename__ = "api_keys"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    member_id: Mapped[int] = mapped_column(ForeignKey("tenant_members.id"), index=True)
    name: Mapped[str] = mapped_column(String(128))
    secret_hash: Mapped[str] = mapped_column(String(64))
    scopes: Mapped[list[str] | None] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    created_by: Mapped[str] = mapped_column(String(128), default="")
    expires_at: Mapped[datetime | None]
    revoked_at: Mapped[datetime | None]
    rotated_from: Mapped[str | None] = mapped_column(String(32))


class GrantRow(Base):
    """A tenant shares one private ``model`` ('' for its whole namespace) with another."""

    __tablename__ = "grants"
    __table_args__ = (UniqueConstraint("tenant_id", "model", "grantee_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    tenant_id: Mapped[int] = mapped_column(ForeignKey("tenants.id"), index=True)
    model: Mapped[str] = mapped_column(String(128), default="")
    grantee_id: Mapped[int] = mapped_column(ForeignKey("tenants.id"), index=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    created_by: Mapped[str] = mapped_column(String(128), default="")


class AuditEventRow(Base):
    """One audited action. Append-only: the database refuses updates and deletes."""

    __tablename__ = "audit_events"

    id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True
    )
    at: Mapped[datetime] = mapped_column(default=utcnow, index=True)
    actor: Mapped[str] = mapped_column(String(128), index=True)
    actor_tenant: Mapped[str | None] = mapped_column(String(64), index=True)
    key_id: Mapped[str | None] = mapped_column(String(32))
    action: Mapped[str] = mapped_column(String(128), index=True)
    method: Mapped[str] = mapped_column(String(8))
    target: Mapped[str] = mapped_column(String(1024))
    tenant: Mapped[str | None] = mapped_column(String(64), index=True)
    outcome: Mapped[str] = mapped_column(String(16))
    status: Mapped[int] = mapped_column(Integer)
    reason: Mapped[str] = mapped_column(Text, default="")
    request_id: Mapped[str] = mapped_column(String(128), default="")


# ---- limits and budgets ------------------------------------------------------


class LimitRow(Base):
    """Rate and concurrency limits of one tenant, API key or model (NULL: not limited)."""

    __tablename__ = "limits"

    scope_type: Mapped[str] = mapped_column(String(16), primary_key=True)
    scope_id: Mapped[str] = mapped_column(String(256), primary_key=True)
    tenant: Mapped[str | None] = mapped_column(String(64), index=True)
    rpm: Mapped[int | None] = mapped_column(Integer)
    concurrency: Mapped[int | None] = mapped_column(Integer)
    tpm: Mapped[int | None] = mapped_column(BigInteger)
    jobs: Mapped[int | None] = mapped_column(Integer)
    """A tenant's job quota: jobs queued and running at once (tenant scope only)."""
    job_concurrency: Mapped[int | None] = mapped_column(Integer)
    """A tenant's jobs running at once (tenant scope only)."""
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_by: Mapped[str] = mapped_column(String(128), default="")


class BudgetRow(Base):
    """A tenant's spending caps and what it spent in ``period`` (micro-units)."""

    __tablename__ = "budgets"

    tenant: Mapped[str] = mapped_column(String(64), primary_key=True)
    hard_cap_micros: Mapped[int | None] = mapped_column(BigInteger)
    soft_cap_micros: Mapped[int | None] = mapped_column(BigInteger)
    spent_micros: Mapped[int] = mapped_column(BigInteger, default=0)
    period: Mapped[str] = mapped_column(String(7))
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)
    reserved_micros: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    """Held by metering's reservations of calls in flight (counted against the hard cap)."""


class BudgetAlertRow(Base):
    """A budget alert, recorded at most once per tenant, period and kind."""

    __tablename__ = "budget_alerts"
    __table_args__ = (UniqueConstraint("tenant", "period", "kind"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    tenant: Mapped[str] = mapped_column(String(64))
    period: Mapped[str] = mapped_column(String(7))
    kind: Mapped[str] = mapped_column(String(16))
    spent_micros: Mapped[int] = mapped_column(BigInteger)
    cap_micros: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


# ---- metering ----------------------------------------------------------------

_SEQ = BigInteger().with_variant(Integer, "sqlite")


class PriceRuleRow(Base):
    """The price book: a unit's price for a model (or one version) from ``effective_from``.

    Append-only in practice: a price change is a new row with a later ``effective_from``.
    """

    __tablename__ = "price_rules"
    __table_args__ = (Index("ix_price_rules_model_unit", "model", "unit", "effective_from"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    model: Mapped[str] = mapped_column(String(193))
    version: Mapped[str | None] = mapped_column(String(64))
    unit: Mapped[str] = mapped_column(String(16))
    unit_price_micros: Mapped[int] = mapped_column(BigInteger)
    per_units: Mapped[int] = mapped_column(BigInteger, default=1)
    revenue_share_bps: Mapped[int] = mapped_column(Integer)
    failure_rule: Mapped[str] = mapped_column(String(16), default="none")
    failure_bps: Mapped[int] = mapped_column(Integer, default=0)
    effective_from: Mapped[datetime]
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    created_by: Mapped[str] = mapped_column(String(128), default="")


class UsageOutboxRow(Base):
    """Usage events written on the request path, waiting for delivery to the ledger."""

    __tablename__ = "usage_outbox"

    id: Mapped[int] = mapped_column(_SEQ, primary_key=True, autoincrement=True)
    event_id: Mapped[str] = mapped_column(String(128))
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    claimed_until: Mapped[datetime | None] = mapped_column(index=True)
    """A drainer holds the row until then; a crashed drainer's claim lapses."""
    attempts: Mapped[int] = mapped_column(Integer, default=0)


class UsageEventRow(Base):
    """The usage ledger: one row per ``event_id``, whatever delivered it how often."""

    __tablename__ = "usage_events"

    seq: Mapped[int] = mapped_column(_SEQ, primary_key=True, autoincrement=True)
    event_id: Mapped[str] = mapped_column(String(128), unique=True)
    tenant: Mapped[str] = mapped_column(String(64), index=True)
    key_id: Mapped[str | None] = mapped_column(String(32))
    model: Mapped[str] = mapped_column(String(193), index=True)
    version: Mapped[str] = mapped_column(String(64))
    manifest_digest: Mapped[str] = mapped_column(String(71))
    endpoint: Mapped[str | None] = mapped_column(String(128))
    task: Mapped[str] = mapped_column(String(64), default="")
    unit: Mapped[str] = mapped_column(String(16))
    quantity: Mapped[int] = mapped_column(BigInteger)
    compute_ms: Mapped[float] = mapped_column(Float, default=0.0)
    gpu_ms: Mapped[float] = mapped_column(Float, default=0.0, server_default="0")
    """Of ``compute_ms``, the GPU's time (priced per GPU-second, the rest per core-second)."""
    wall_ms: Mapped[float] = mapped_column(Float, default=0.0)
    status: Mapped[str] = mapped_column(String(16))
    started_at: Mapped[datetime]
    finished_at: Mapped[datetime] = mapped_column(index=True)
    request_id: Mapped[str] = mapped_column(String(128), default="")
    prediction_id: Mapped[str] = mapped_column(String(128), default="")
    price_rule_id: Mapped[int | None] = mapped_column(Integer)
    unit_price_micros: Mapped[int] = mapped_column(BigInteger)
    per_units: Mapped[int] = mapped_column(BigInteger)
    failure_rule: Mapped[str] = mapped_column(String(16))
    failure_bps: Mapped[int] = mapped_column(Integer)
    revenue_share_bps: Mapped[int] = mapped_column(Integer)
    amount_micros: Mapped[int] = mapped_column(BigInteger)
    publisher: Mapped[str] = mapped_column(String(64), index=True)
    publisher_micros: Mapped[int] = mapped_column(BigInteger)
    source: Mapped[str] = mapped_column(String(256))
    reservation_id: Mapped[str | None] = mapped_column(String(32))
    recorded_at: Mapped[datetime] = mapped_column(default=utcnow)


class BalanceRow(Base):
    """A tenant's prepaid balance or an API key's spending allowance (micro-units)."""

    __tablename__ = "balances"

    scope_type: Mapped[str] = mapped_column(String(16), primary_key=True)
    scope_id: Mapped[str] = mapped_column(String(256), primary_key=True)
    tenant: Mapped[str] = mapped_column(String(64), index=True)
    balance_micros: Mapped[int] = mapped_column(BigInteger, default=0)
    reserved_micros: Mapped[int] = mapped_column(BigInteger, default=0)
    overdraft_micros: Mapped[int] = mapped_column(BigInteger, default=0)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)


class ReservationRow(Base):
    """Money held for a call in flight until it settles, is released, or expires."""

    __tablename__ = "reservations"
    __table_args__ = (Index("ix_reservations_state_expires", "state", "expires_at"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    tenant: Mapped[str] = mapped_column(String(64), index=True)
    key_id: Mapped[str | None] = mapped_column(String(32))
    amount_micros: Mapped[int] = mapped_column(BigInteger)
    levels: Mapped[list[str]] = mapped_column(JSON)
    state: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    expires_at: Mapped[datetime]
    settled_micros: Mapped[int | None] = mapped_column(BigInteger)
    settled_at: Mapped[datetime | None]
    model: Mapped[str | None] = mapped_column(String(128))
    """``owner/name`` the call was for (None: taken before reservations named it)."""
    reported_micros: Mapped[int | None] = mapped_column(BigInteger)
    """What a remote backend reported against this call (``POST /api/usage/events``,
    once); None: nothing yet."""


class UsageAuthorizationRow(Base):
    """A consumer tenant's standing permission for a publisher tenant to report its
    usage (of one ``model``, or of any of the publisher's), up to ``cap_micros``."""

    __tablename__ = "usage_authorizations"
    __table_args__ = (Index("ix_usage_authorizations_consumer_publisher", "consumer", "publisher"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    consumer: Mapped[str] = mapped_column(String(64))
    publisher: Mapped[str] = mapped_column(String(64), index=True)
    model: Mapped[str | None] = mapped_column(String(128))
    cap_micros: Mapped[int] = mapped_column(BigInteger)
    spent_micros: Mapped[int] = mapped_column(BigInteger, default=0)
    expires_at: Mapped[datetime | None]
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    created_by: Mapped[str] = mapped_column(String(128))
    withdrawn_at: Mapped[datetime | None]
    withdrawn_by: Mapped[str | None] = mapped_column(String(128))


# ---- serving: endpoints, deployments, idempotency keys ----------------------


class EndpointRow(Base):
    """A stable name owned by a tenant; ``revision`` moves whenever its traffic does."""

    __tablename__ = "endpoints"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(63), unique=True)
    tenant: Mapped[str] = mapped_column(String(64), index=True)
    description: Mapped[str] = mapped_column(Text, default="")
    deadline_ms: Mapped[int] = mapped_column(Integer)
    priority: Mapped[str] = mapped_column(String(16))
    active_deployment_id: Mapped[int | None] = mapped_column(Integer)
    previous_deployment_id: Mapped[int | None] = mapped_column(Integer)
    rollback_until: Mapped[datetime | None]
    fallback: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    log_policy: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    slos: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON)
    degradation: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    revision: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    created_by: Mapped[str] = mapped_column(String(128), default="")


class DeploymentRow(Base):
    """Versions, weights, shadow, resources and rollout policy of one endpoint deployment."""

    __tablename__ = "deployments"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    endpoint_id: Mapped[int] = mapped_column(ForeignKey("endpoints.id"), index=True)
    state: Mapped[str] = mapped_column(String(16), index=True)
    spec: Mapped[dict[str, Any]] = mapped_column(JSON)
    weights: Mapped[list[int]] = mapped_column(JSON)
    rollout: Mapped[dict[str, Any]] = mapped_column(JSON)
    progress: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    cause: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    created_by: Mapped[str] = mapped_column(String(128), default="")
    activated_at: Mapped[datetime | None]
    ended_at: Mapped[datetime | None]


class RemoteBackendRow(Base):
    """A remote inference server a tenant's deployments may run versions on."""

    __tablename__ = "remote_backends"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(63), unique=True)
    tenant: Mapped[str] = mapped_column(String(64), index=True)
    kind: Mapped[str] = mapped_column(String(16))
    url: Mapped[str] = mapped_column(Text)
    api_key: Mapped[str | None] = mapped_column(Text)
    capabilities: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    created_by: Mapped[str] = mapped_column(String(128), default="")


class IdempotencyKeyRow(Base):
    """A prediction made under an ``Idempotency-Key``: repeats get its stored response."""

    __tablename__ = "idempotency_keys"

    tenant: Mapped[str] = mapped_column(String(64), primary_key=True)
    endpoint: Mapped[str] = mapped_column(String(63), primary_key=True)
    key: Mapped[str] = mapped_column(String(255), primary_key=True)
    fingerprint: Mapped[str] = mapped_column(String(64))
    state: Mapped[str] = mapped_column(String(16))
    owner: Mapped[str] = mapped_column(String(32))
    response_status: Mapped[int | None] = mapped_column(Integer)
    response_body: Mapped[bytes | None] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    locked_until: Mapped[datetime]
    expires_at: Mapped[datetime] = mapped_column(index=True)


# ---- billing: invoices, credit notes, publisher statements -------------------

# Billing reads the ledger by period, and a period is when the ledger recorded the usage.
Index("ix_usage_events_recorded_at", UsageEventRow.recorded_at)


class InvoiceRow(Base):
    """A tenant's charges for one period: a draft (rebuilt on demand) or finalised.

    The database refuses to change or delete a finalised invoice or its lines.
    """

    __tablename__ = "invoices"
    __table_args__ = (UniqueConstraint("tenant", "period"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    tenant: Mapped[str] = mapped_column(String(64))
    period: Mapped[str] = mapped_column(String(7), index=True)
    status: Mapped[str] = mapped_column(String(16))
    total_micros: Mapped[int] = mapped_column(BigInteger)
    events: Mapped[int] = mapped_column(BigInteger)
    generated_at: Mapped[datetime] = mapped_column(default=utcnow)
    finalized_at: Mapped[datetime | None]
    finalized_by: Mapped[str | None] = mapped_column(String(128))


class InvoiceLineRow(Base):
    """Usage of one model version and unit at one price and charge rate."""

    __tablename__ = "invoice_lines"

    invoice_id: Mapped[int] = mapped_column(ForeignKey("invoices.id"), primary_key=True)
    line_no: Mapped[int] = mapped_column(Integer, primary_key=True)
    model: Mapped[str] = mapped_column(String(193))
    version: Mapped[str] = mapped_column(String(64))
    unit: Mapped[str] = mapped_column(String(16))
    price_rule_id: Mapped[int | None] = mapped_column(Integer)
    unit_price_micros: Mapped[int] = mapped_column(BigInteger)
    per_units: Mapped[int] = mapped_column(BigInteger)
    charge_bps: Mapped[int] = mapped_column(Integer)
    events: Mapped[int] = mapped_column(BigInteger)
    quantity: Mapped[int] = mapped_column(BigInteger)
    amount_micros: Mapped[int] = mapped_column(BigInteger)


class CreditNoteRow(Base):
    """A correction of a finalised invoice. Append-only, with its lines."""

    __tablename__ = "credit_notes"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    invoice_id: Mapped[int] = mapped_column(ForeignKey("invoices.id"), index=True)
    reason: Mapped[str] = mapped_column(Text)
    total_micros: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    created_by: Mapped[str] = mapped_column(String(128))


class CreditNoteLineRow(Base):
    __tablename__ = "credit_note_lines"

    credit_note_id: Mapped[int] = mapped_column(ForeignKey("credit_notes.id"), primary_key=True)
    line_no: Mapped[int] = mapped_column(Integer, primary_key=True)
    invoice_line: Mapped[int | None] = mapped_column(Integer)
    description: Mapped[str] = mapped_column(String(512))
    amount_micros: Mapped[int] = mapped_column(BigInteger)


class StatementRow(Base):
    """A publisher's revenue for one period: draft or finalised, like an invoice."""

    __tablename__ = "statements"
    __table_args__ = (UniqueConstraint("publisher", "period"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    publisher: Mapped[str] = mapped_column(String(64))
    period: Mapped[str] = mapped_column(String(7), index=True)
    status: Mapped[str] = mapped_column(String(16))
    events: Mapped[int] = mapped_column(BigInteger)
    revenue_micros: Mapped[int] = mapped_column(BigInteger)
    publisher_share_micros: Mapped[int] = mapped_column(BigInteger)
    platform_take_micros: Mapped[int] = mapped_column(BigInteger)
    generated_at: Mapped[datetime] = mapped_column(default=utcnow)
    finalized_at: Mapped[datetime | None]
    finalized_by: Mapped[str | None] = mapped_column(String(128))


class StatementLineRow(Base):
    """Revenue of one model version and unit at one revenue share."""

    __tablename__ = "statement_lines"

    statement_id: Mapped[int] = mapped_column(ForeignKey("statements.id"), primary_key=True)
    line_no: Mapped[int] = mapped_column(Integer, primary_key=True)
    model: Mapped[str] = mapped_column(String(193))
    version: Mapped[str] = mapped_column(String(64))
    unit: Mapped[str] = mapped_column(String(16))
    revenue_share_bps: Mapped[int] = mapped_column(Integer)
    events: Mapped[int] = mapped_column(BigInteger)
    quantity: Mapped[int] = mapped_column(BigInteger)
    revenue_micros: Mapped[int] = mapped_column(BigInteger)
    publisher_share_micros: Mapped[int] = mapped_column(BigInteger)


# ---- prediction log ----------------------------------------------------------


class PredictionRow(Base):
    """One prediction, written in batches off the request path. Never updated."""

    __tablename__ = "predictions"
    __table_args__ = (
        Index("ix_predictions_endpoint_received_at", "endpoint", "received_at"),
        Index("ix_predictions_received_at", "received_at"),
    )

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    endpoint: Mapped[str] = mapped_column(String(64))
    owner: Mapped[str | None] = mapped_column(String(64), index=True)
    model: Mapped[str | None] = mapped_column(String(193))
    version: Mapped[str | None] = mapped_column(String(64))
    backend: Mapped[str | None] = mapped_column(String(128))
    received_at: Mapped[datetime]
    latency_seconds: Mapped[float]
    stages: Mapped[dict[str, Any]] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(String(64))
    tenant: Mapped[str | None] = mapped_column(String(64), index=True)
    key_id: Mapped[str | None] = mapped_column(String(32))
    request_id: Mapped[str] = mapped_column(String(128), default="")
    fallback: Mapped[str | None] = mapped_column(String(16))
    shadow_of: Mapped[str | None] = mapped_column(String(64), index=True)
    arm: Mapped[str | None] = mapped_column(String(64))
    answer_label: Mapped[str | None] = mapped_column(String(256))
    answer_value: Mapped[float | None]
    inputs: Mapped[list[Any] | None] = mapped_column(JSON)
    outputs: Mapped[list[Any] | None] = mapped_column(JSON)
    detail: Mapped[str] = mapped_column(String(16))


class PredictionRetentionRow(Base):
    """How many days a tenant's prediction log keeps its records (the default when absent)."""

    __tablename__ = "prediction_retention"

    tenant: Mapped[str] = mapped_column(String(64), primary_key=True)
    days: Mapped[int] = mapped_column(Integer)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_by: Mapped[str] = mapped_column(String(128))


class PredictionSamplingRow(Base):
    """A tenant's or a version's sampling of direct calls into the prediction log
    (``observability.sampling``); none: off."""

    __tablename__ = "prediction_sampling"

    scope: Mapped[str] = mapped_column(String(16), primary_key=True)
    """``tenant`` or ``version``."""
    subject: Mapped[str] = mapped_column(String(258), primary_key=True)
    """The tenant, or the version as ``owner/name/version``."""
    rate: Mapped[float]
    payloads: Mapped[bool]
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_by: Mapped[str] = mapped_column(String(128))


class PredictionOutcomeRow(Base):
    """The delayed label or outcome of one prediction (at most one, never changed)."""

    __tablename__ = "prediction_outcomes"

    prediction_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    label: Mapped[str | None] = mapped_column(String(256))
    value: Mapped[float | None]
    recorded_at: Mapped[datetime] = mapped_column(default=utcnow)
    recorded_by: Mapped[str] = mapped_column(String(128))


class EndpointMonitorRow(Base):
    """An endpoint's monitor policy (``monitoring.types.MonitorPolicy`` as JSON)."""

    __tablename__ = "endpoint_monitors"

    endpoint: Mapped[str] = mapped_column(String(63), primary_key=True)
    policy: Mapped[dict[str, Any]] = mapped_column(JSON)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_by: Mapped[str] = mapped_column(String(128), default="")


# ---- files -------------------------------------------------------------------


class FileRow(Base):
    """A tenant's uploaded file: a name and purpose over a blob (``modelport.files``)."""

    __tablename__ = "files"
    __table_args__ = (Index("ix_files_tenant_created", "tenant", "created_at", "id"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    tenant: Mapped[str] = mapped_column(String(64))
    purpose: Mapped[str] = mapped_column(String(32))
    filename: Mapped[str] = mapped_column(String(255))
    size: Mapped[int] = mapped_column(BigInteger)
    digest: Mapped[str] = mapped_column(String(71))
    lines: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column()


# ---- webhooks ----------------------------------------------------------------


class WebhookSecretRow(Base):
    """One signing secret of a tenant. The newest signs every delivery; one it replaced
    signs too until ``retired_at`` (the rotation's overlap). ``value`` is sealed
    (``store.secrets``: ``fernet:v1:...``)."""

    __tablename__ = "webhook_secrets"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    tenant: Mapped[str] = mapped_column(String(64), index=True)
    value: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime]
    retired_at: Mapped[datetime | None]


class WebhookDeliveryRow(Base):
    """One message to one URL, tried until delivered or its retry window ends."""

    __tablename__ = "webhook_deliveries"
    __table_args__ = (
        Index("ix_webhook_deliveries_status_next_attempt_at", "status", "next_attempt_at"),
        Index("ix_webhook_deliveries_tenant_subject", "tenant", "subject"),
        Index("ix_webhook_deliveries_tenant_created_at", "tenant", "created_at"),
        UniqueConstraint("tenant", "dedupe_key"),
    )

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    tenant: Mapped[str] = mapped_column(String(64))
    message_id: Mapped[str] = mapped_column(String(64))
    url: Mapped[str] = mapped_column(Text)
    event_type: Mapped[str] = mapped_column(String(128))
    subject: Mapped[str] = mapped_column(String(128))
    body: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(16))
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime]
    next_attempt_at: Mapped[datetime | None]
    give_up_at: Mapped[datetime]
    claimed_until: Mapped[datetime | None]
    lease: Mapped[str | None] = mapped_column(String(32))
    finished_at: Mapped[datetime | None]
    last_status_code: Mapped[int | None] = mapped_column(Integer)
    last_error: Mapped[str | None] = mapped_column(Text)
    redelivery_of: Mapped[str | None] = mapped_column(String(32))
    trace_context: Mapped[dict[str, str] | None] = mapped_column(JSON)
    """The W3C trace context of what enqueued it, sent with every attempt."""
    dedupe_key: Mapped[str | None] = mapped_column(String(160))
    """The caller's key of an enqueue (e.g. a job and its final state): the same key
    again answers this delivery instead of making another."""


class WebhookAttemptRow(Base):
    """One try at posting a delivery. Never updated."""

    __tablename__ = "webhook_attempts"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    delivery_id: Mapped[str] = mapped_column(ForeignKey("webhook_deliveries.id"), index=True)
    number: Mapped[int] = mapped_column(Integer)
    attempted_at: Mapped[datetime]
    status_code: Mapped[int | None] = mapped_column(Integer)
    error: Mapped[str | None] = mapped_column(Text)
    duration_ms: Mapped[int] = mapped_column(Integer)


# ---- content moderation ------------------------------------------------------


class ModerationPolicyRow(Base):
    """One version of a tenant's moderation policy. A change adds a version; the
    highest is in force. Never updated."""

    __tablename__ = "moderation_policies"

    tenant: Mapped[str] = mapped_column(String(64), primary_key=True)
    version: Mapped[int] = mapped_column(Integer, primary_key=True)
    policy_id: Mapped[str] = mapped_column(String(32))
    strictness: Mapped[str] = mapped_column(String(16))
    rules: Mapped[list[Any]] = mapped_column(JSON)
    classifier: Mapped[str | None] = mapped_column(String(200))
    thresholds: Mapped[dict[str, Any]] = mapped_column(JSON)
    sync: Mapped[bool] = mapped_column(default=False)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    created_by: Mapped[str] = mapped_column(String(128))


class ModerationDecisionRow(Base):
    """One moderation decision (allowed, flagged or blocked), for the audit. Never
    updated."""

    __tablename__ = "moderation_decisions"
    __table_args__ = (Index("ix_moderation_decisions_tenant_id", "tenant", "id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    tenant: Mapped[str] = mapped_column(String(64))
    stage: Mapped[str] = mapped_column(String(8))
    disposition: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str] = mapped_column(Text)
    categories: Mapped[list[Any]] = mapped_column(JSON)
    scores: Mapped[dict[str, Any]] = mapped_column(JSON)
    policy_id: Mapped[str] = mapped_column(String(32))
    policy_version: Mapped[int] = mapped_column(Integer)
    model: Mapped[str] = mapped_column(String(193))
    version: Mapped[str] = mapped_column(String(64))
    request_id: Mapped[str] = mapped_column(String(128))
    job_id: Mapped[str | None] = mapped_column(String(64), index=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


# ---- jobs --------------------------------------------------------------------


class JobRow(Base):
    """A durable job: its target, inputs (by digest), pipeline, state and the lease of
    the runner working on it. ``seq`` orders listings (newest first)."""

    __tablename__ = "jobs"
    __table_args__ = (
        UniqueConstraint("tenant", "idempotency_key"),
        Index("ix_jobs_state_lease_expires_at", "state", "lease_expires_at"),
        Index("ix_jobs_tenant_seq", "tenant", "seq"),
        Index("ix_jobs_tenant_state", "tenant", "state"),
        Index("ix_jobs_erasable", "erased_at", "finished_at"),
    )

    seq: Mapped[int] = mapped_column(_SEQ, primary_key=True, autoincrement=True)
    id: Mapped[str] = mapped_column(String(32), unique=True)
    tenant: Mapped[str] = mapped_column(String(64))
    principal: Mapped[dict[str, Any]] = mapped_column(JSON)
    target_kind: Mapped[str] = mapped_column(String(16))
    target: Mapped[str] = mapped_column(String(256))
    input_digest: Mapped[str] = mapped_column(String(71))
    pipeline: Mapped[list[Any]] = mapped_column(JSON)
    webhook: Mapped[str | None] = mapped_column(String(2048))
    idempotency_key: Mapped[str | None] = mapped_column(String(256))
    fingerprint: Mapped[str] = mapped_column(String(71))
    state: Mapped[str] = mapped_column(String(16))
    stage: Mapped[int] = mapped_column(Integer, default=0)
    cancel_requested: Mapped[bool] = mapped_column(default=False)
    created_at: Mapped[datetime]
    started_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]
    error_code: Mapped[str | None] = mapped_column(String(64))
    error_message: Mapped[str | None] = mapped_column(Text)
    output_digest: Mapped[str | None] = mapped_column(String(71))
    lease_owner: Mapped[str | None] = mapped_column(String(64))
    lease_expires_at: Mapped[datetime | None]
    lease_generation: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    """Incremented by every claim: the fencing token a runner's writes carry."""
    trace_context: Mapped[dict[str, str] | None] = mapped_column(JSON)
    """The submitting request's W3C trace context (``traceparent``, ``tracestate``):
    the job's stages continue its trace. None when it was not traced."""
    erased_at: Mapped[datetime | None] = mapped_column(default=None)
    """When its inputs and outputs were erased (its tenant's retention, or the right to
    deletion): the record stays for billing, its digests are cleared."""


class JobStageRow(Base):
    """One stage of one job: attempts, times, the last error, and its output (by digest)
    once done."""

    __tablename__ = "job_stages"

    job_id: Mapped[str] = mapped_column(
        String(32), ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True
    )
    position: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(64))
    implementation: Mapped[str] = mapped_column(String(64))
    state: Mapped[str] = mapped_column(String(16))
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    closed_attempts: Mapped[int] = mapped_column(Integer, default=0)
    """Attempts whose end a runner recorded (failed, timed out, interrupted); an attempt
    that died with its runner is not one. The next attempt's metered call takes a new id
    after each (a closed attempt's call was settled: its ids are spent)."""
    started_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]
    error_code: Mapped[str | None] = mapped_column(String(64))
    error_message: Mapped[str | None] = mapped_column(Text)
    output_digest: Mapped[str | None] = mapped_column(String(71))


class BlobErasureRow(Base):
    """A blob whose last references an erasure removed: its bytes go once nothing else
    lists them (``jobs.erasure``). Written in the erasure's transaction, so a crash
    before the bytes went leaves the row for the next sweep."""

    __tablename__ = "blob_erasures"

    digest: Mapped[str] = mapped_column(String(71), primary_key=True)
    tenant: Mapped[str] = mapped_column(String(64), primary_key=True)
    """The tenant whose data it was: its possession of the blob goes with the bytes."""
    queued_at: Mapped[datetime]


# ---- batches -------------------------------------------------------------------


class BatchRow(Base):
    """A batch over a file of requests (OpenAI's Batch API): the job that runs it and
    what the caller asked; its state and outputs are the job's."""

    __tablename__ = "batches"
    __table_args__ = (Index("ix_batches_tenant_created", "tenant", "created_at", "id"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    tenant: Mapped[str] = mapped_column(String(64))
    job_id: Mapped[str] = mapped_column(
        String(32), ForeignKey("jobs.id", ondelete="CASCADE"), unique=True
    )
    endpoint: Mapped[str] = mapped_column(String(64))
    input_file_id: Mapped[str] = mapped_column(String(40))
    completion_window: Mapped[str] = mapped_column(String(16))
    batch_metadata: Mapped[dict[str, Any] | None] = mapped_column("metadata", JSON)
    total: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime]


class BatchShardRow(Base):
    """A finished shard of a batch job: written once, when all its rows are done; a
    resumed run skips the shards it finds here."""

    __tablename__ = "batch_shards"

    job_id: Mapped[str] = mapped_column(
        String(32), ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True
    )
    position: Mapped[int] = mapped_column(Integer, primary_key=True)
    rows: Mapped[int] = mapped_column(Integer)
    failed: Mapped[int] = mapped_column(Integer)
    output_digest: Mapped[str] = mapped_column(String(71))
    error_digest: Mapped[str] = mapped_column(String(71))
    created_at: Mapped[datetime]


class ConsoleSessionRow(Base):
    """One signed-in web console session. The browser holds only a random session id;
    the row is keyed by that id's SHA-256 (a copy of the table names no live cookie),
    and ``credential`` (the API key the person signed in with) is sealed
    (``store.secrets``: ``fernet:v1:...``)."""

    __tablename__ = "console_sessions"

    id_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    credential: Mapped[str] = mapped_column(Text)
    tenant: Mapped[str | None] = mapped_column(String(64))
    csrf_token: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime]
    expires_at: Mapped[datetime] = mapped_column(index=True)


# ---- datasets and evaluations ------------------------------------------------


class DatasetRow(Base):
    """A dataset: a name in a tenant's namespace, with its visibility and license
    (fixed at creation, as a model's are)."""

    __tablename__ = "datasets"
    __table_args__ = (UniqueConstraint("owner", "name"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    owner: Mapped[str] = mapped_column(String(64), index=True)
    name: Mapped[str] = mapped_column(String(128))
    visibility: Mapped[str] = mapped_column(String(16))
    description: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    created_by: Mapped[str] = mapped_column(String(128), default="")


class DatasetVersionRow(Base):
    """An immutable dataset version: its manifest (splits, columns, task, license) and
    the manifest's digest, its identity. Nothing in this row ever changes."""

    __tablename__ = "dataset_versions"
    __table_args__ = (UniqueConstraint("dataset_id", "version"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    dataset_id: Mapped[int] = mapped_column(ForeignKey("datasets.id"), index=True)
    version: Mapped[str] = mapped_column(String(64))
    digest: Mapped[str] = mapped_column(String(71))
    task: Mapped[str] = mapped_column(String(16))
    license: Mapped[str] = mapped_column(String(128))
    manifest: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    created_by: Mapped[str] = mapped_column(String(128), default="")


class PromptTemplateRow(Base):
    """A prompt template: a name in a tenant's namespace, with its visibility."""

    __tablename__ = "prompt_templates"
    __table_args__ = (UniqueConstraint("owner", "name"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    owner: Mapped[str] = mapped_column(String(64), index=True)
    name: Mapped[str] = mapped_column(String(128))
    visibility: Mapped[str] = mapped_column(String(16))
    description: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    created_by: Mapped[str] = mapped_column(String(128), default="")


class PromptTemplateVersionRow(Base):
    """An immutable template version: its manifest (messages, variables, license) and
    the manifest's digest, its identity. Nothing in this row ever changes."""

    __tablename__ = "prompt_template_versions"
    __table_args__ = (UniqueConstraint("template_id", "version"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    template_id: Mapped[int] = mapped_column(ForeignKey("prompt_templates.id"), index=True)
    version: Mapped[str] = mapped_column(String(64))
    digest: Mapped[str] = mapped_column(String(71))
    license: Mapped[str] = mapped_column(String(128))
    manifest: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    created_by: Mapped[str] = mapped_column(String(128), default="")


class EvaluationRow(Base):
    """A model version's scores on a dataset split: ``verified`` (run by the platform as
    a job, its results written once when the job ends) or ``claimed`` (stated by the
    model's publisher). Linked to both digests; results never change once written."""

    __tablename__ = "evaluations"
    __table_args__ = (
        Index("ix_evaluations_board", "task", "dataset_owner", "dataset_name", "state"),
        Index("ix_evaluations_model", "model_owner", "model_name"),
    )

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))
    tenant: Mapped[str] = mapped_column(String(64), index=True)
    created_by: Mapped[str] = mapped_column(String(128))
    job_id: Mapped[str | None] = mapped_column(String(32), unique=True)
    model_owner: Mapped[str] = mapped_column(String(64))
    model_name: Mapped[str] = mapped_column(String(128))
    model_version: Mapped[str] = mapped_column(String(64))
    version_digest: Mapped[str] = mapped_column(String(71))
    dataset_owner: Mapped[str] = mapped_column(String(64))
    dataset_name: Mapped[str] = mapped_column(String(128))
    dataset_version: Mapped[str] = mapped_column(String(64))
    dataset_digest: Mapped[str] = mapped_column(String(71))
    split: Mapped[str] = mapped_column(String(64))
    task: Mapped[str] = mapped_column(String(16))
    output: Mapped[str] = mapped_column(String(128))
    published: Mapped[bool] = mapped_column(default=False, server_default=false())
    state: Mapped[str] = mapped_column(String(16))
    metrics: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    rows: Mapped[int | None] = mapped_column(Integer)
    latency_ms: Mapped[float | None] = mapped_column(Float)
    error_code: Mapped[str | None] = mapped_column(String(64))
    error_message: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime]
    finished_at: Mapped[datetime | None]
    endpoint: Mapped[str | None] = mapped_column(String(64))
    """The endpoint it called, for an evaluation of an endpoint (else None)."""
    served: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON)
    """An endpoint evaluation's versions that served its rows: model, version, digest,
    rows."""
    score: Mapped[float | None] = mapped_column(Float)
    """The task's leaderboard metric, where the result counts as its version's verified
    score (the catalog's score facet reads it)."""
    higher_is_better: Mapped[bool | None]


# ---- worker pool -------------------------------------------------------------


class WorkerPlacementRow(Base):
    """One replica of a deployed version placed on a worker of the pool: the gateways'
    placer writes it, the worker loads it and records its state."""

    __tablename__ = "worker_placements"
    __table_args__ = (
        UniqueConstraint("ref", "worker_id", name="uq_worker_placements_ref_worker"),
        Index("ix_worker_placements_worker", "worker_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    ref: Mapped[str] = mapped_column(String(256))
    manifest_digest: Mapped[str] = mapped_column(String(71))
    worker_id: Mapped[str] = mapped_column(String(128))
    state: Mapped[str] = mapped_column(String(16))
    memory_bytes: Mapped[int] = mapped_column(BigInteger, default=0)
    cause: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)
