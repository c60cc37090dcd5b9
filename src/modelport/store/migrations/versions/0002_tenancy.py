"""tenancy: tenants, members and service accounts, API keys, grants, audit log

Revision ID: 0002_tenancy
Revises: 0001
Create Date: 2026-11-30 03:04:19
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002_tenancy"
down_revision = "0001"
branch_labels = None
depends_on = None

_TIME = sa.DateTime(timezone=True)

# The audit log is append-only: the database itself refuses updates and deletes.
_PG_GUARD = """
CREATE FUNCTION audit_events_append_only() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'audit_events is append-only';
END;
$$ LANGUAGE plpgsql
"""
_PG_TRIGGER = """
CREATE TRIGGER audit_events_append_only BEFORE UPDATE OR DELETE ON audit_events
FOR EACH ROW EXECUTE FUNCTION audit_events_append_only()
"""
_SQLITE_TRIGGERS = [
    f"""
    CREATE TRIGGER audit_events_no_{verb} BEFORE {verb.upper()} ON audit_events
    BEGIN SELECT RAISE(ABORT, 'audit_events is append-only'); END
    """
    for verb in ("update", "delete")
]


def upgrade() -> None:
    op.create_table(
        "tenants",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("slug", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=256), nullable=False),
        sa.Column("require_separation", sa.Boolean(), nullable=False),
        sa.Column("created_at", _TIME, nullable=False),
        sa.Column("created_by", sa.String(length=128), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_tenants")),
        sa.UniqueConstraint("slug", name=op.f("uq_tenants_slug")),
    )
    op.create_table(
        "tenant_members",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("tenant_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("roles", sa.JSON(), nullable=False),
        sa.Column("created_at", _TIME, nullable=False),
        sa.Column("created_by", sa.String(length=128), nullable=False),
        sa.Column("removed_at", _TIME, nullable=True),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name=op.f("fk_tenant_members_tenant_id_tenants")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_tenant_members")),
        sa.UniqueConstraint("tenant_id", "name", name=op.f("uq_tenant_members_tenant_id_name")),
    )
    with op.batch_alter_table("tenant_members", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_tenant_members_tenant_id"), ["tenant_id"], unique=False
        )

    op.create_table(
        "api_keys",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("member_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("secret_hash", sa.String(length=64), nullable=False),
        sa.Column("scopes", sa.JSON(), nullable=True),
        sa.Column("created_at", _TIME, nullable=False),
        sa.Column("created_by", sa.String(length=128), nullable=False),
        sa.Column("expires_at", _TIME, nullable=True),
        sa.Column("revoked_at", _TIME, nullable=True),
        sa.Column("rotated_from", sa.String(length=32), nullable=True),
        sa.ForeignKeyConstraint(
            ["member_id"], ["tenant_members.id"], name=op.f("fk_api_keys_member_id_tenant_members")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_keys")),
    )
    with op.batch_alter_table("api_keys", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_api_keys_member_id"), ["member_id"], unique=False)

    op.create_table(
        "grants",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("tenant_id", sa.Integer(), nullable=False),
        sa.Column("model", sa.String(length=128), nullable=False),
        sa.Column("grantee_id", sa.Integer(), nullable=False),
        sa.Column("created_at", _TIME, nullable=False),
        sa.Column("created_by", sa.String(length=128), nullable=False),
        sa.ForeignKeyConstraint(
            ["grantee_id"], ["tenants.id"], name=op.f("fk_grants_grantee_id_tenants")
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name=op.f("fk_grants_tenant_id_tenants")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_grants")),
        sa.UniqueConstraint(
            "tenant_id", "model", "grantee_id", name=op.f("uq_grants_tenant_id_model_grantee_id")
        ),
    )
    with op.batch_alter_table("grants", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_grants_grantee_id"), ["grantee_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_grants_tenant_id"), ["tenant_id"], unique=False)

    op.create_table(
        "audit_events",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("at", _TIME, nullable=False),
        sa.Column("actor", sa.String(length=128), nullable=False),
        sa.Column("actor_tenant", sa.String(length=64), nullable=True),
        sa.Column("key_id", sa.String(length=32), nullable=True),
        sa.Column("action", sa.String(length=128), nullable=False),
        sa.Column("method", sa.String(length=8), nullable=False),
        sa.Column("target", sa.String(length=1024), nullable=False),
        sa.Column("tenant", sa.String(length=64), nullable=True),
        sa.Column("outcome", sa.String(length=16), nullable=False),
        sa.Column("status", sa.Integer(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("request_id", sa.String(length=128), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_events")),
    )
    with op.batch_alter_table("audit_events", schema=None) as batch_op:
        for column in ("action", "actor", "actor_tenant", "at", "tenant"):
            batch_op.create_index(batch_op.f(f"ix_audit_events_{column}"), [column], unique=False)

    if op.get_bind().dialect.name == "postgresql":
        op.execute(_PG_GUARD)
        op.execute(_PG_TRIGGER)
    elif op.get_bind().dialect.name == "sqlite":
        for statement in _SQLITE_TRIGGERS:
            op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS audit_events_append_only ON audit_events")
        op.execute("DROP FUNCTION IF EXISTS audit_events_append_only()")
    op.drop_table("audit_events")
    op.drop_table("grants")
    op.drop_table("api_keys")
    op.drop_table("tenant_members")
    op.drop_table("tenants")
