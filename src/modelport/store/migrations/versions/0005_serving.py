"""serving: endpoints, their deployments, and prediction idempotency keys

Revision ID: 0005_serving
Revises: 0004_metering
Create Date: 2026-11-30 07:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005_serving"
down_revision = "0004_metering"
branch_labels = None
depends_on = None

_TIME = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "endpoints",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("name", sa.String(length=63), nullable=False),
        sa.Column("tenant", sa.String(length=64), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("deadline_ms", sa.Integer(), nullable=False),
        sa.Column("priority", sa.String(length=16), nullable=False),
        sa.Column("active_deployment_id", sa.Integer(), nullable=True),
        sa.Column("previous_deployment_id", sa.Integer(), nullable=True),
        sa.Column("rollback_until", _TIME, nullable=True),
        sa.Column("fallback", sa.JSON(), nullable=True),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.Column("created_at", _TIME, nullable=False),
        sa.Column("created_by", sa.String(length=128), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_endpoints")),
        sa.UniqueConstraint("name", name=op.f("uq_endpoints_name")),
    )
    op.create_index(op.f("ix_endpoints_tenant"), "endpoints", ["tenant"], unique=False)
    op.create_table(
        "deployments",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("endpoint_id", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("weights", sa.JSON(), nullable=False),
        sa.Column("rollout", sa.JSON(), nullable=False),
        sa.Column("progress", sa.JSON(), nullable=False),
        sa.Column("cause", sa.Text(), nullable=False),
        sa.Column("created_at", _TIME, nullable=False),
        sa.Column("created_by", sa.String(length=128), nullable=False),
        sa.Column("activated_at", _TIME, nullable=True),
        sa.Column("ended_at", _TIME, nullable=True),
        sa.ForeignKeyConstraint(
            ["endpoint_id"], ["endpoints.id"], name=op.f("fk_deployments_endpoint_id_endpoints")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_deployments")),
    )
    op.create_index(
        op.f("ix_deployments_endpoint_id"), "deployments", ["endpoint_id"], unique=False
    )
    op.create_index(op.f("ix_deployments_state"), "deployments", ["state"], unique=False)
    op.create_table(
        "idempotency_keys",
        sa.Column("tenant", sa.String(length=64), nullable=False),
        sa.Column("endpoint", sa.String(length=63), nullable=False),
        sa.Column("key", sa.String(length=255), nullable=False),
        sa.Column("fingerprint", sa.String(length=64), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("owner", sa.String(length=32), nullable=False),
        sa.Column("response_status", sa.Integer(), nullable=True),
        sa.Column("response_body", sa.LargeBinary(), nullable=True),
        sa.Column("created_at", _TIME, nullable=False),
        sa.Column("locked_until", _TIME, nullable=False),
        sa.Column("expires_at", _TIME, nullable=False),
        sa.PrimaryKeyConstraint("tenant", "endpoint", "key", name=op.f("pk_idempotency_keys")),
    )
    op.create_index(
        op.f("ix_idempotency_keys_expires_at"), "idempotency_keys", ["expires_at"], unique=False
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_idempotency_keys_expires_at"), table_name="idempotency_keys")
    op.drop_table("idempotency_keys")
    op.drop_index(op.f("ix_deployments_state"), table_name="deployments")
    op.drop_index(op.f("ix_deployments_endpoint_id"), table_name="deployments")
    op.drop_table("deployments")
    op.drop_index(op.f("ix_endpoints_tenant"), table_name="endpoints")
    op.drop_table("endpoints")
