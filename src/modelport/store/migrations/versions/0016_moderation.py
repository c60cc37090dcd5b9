"""content moderation: tenants' versioned policies and the decisions' audit

Revision ID: 0016_moderation
Revises: 0015_webhooks
Create Date: 2026-12-01 23:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016_moderation"
down_revision = "0015_webhooks"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "moderation_policies",
        sa.Column("tenant", sa.String(length=64), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("policy_id", sa.String(length=32), nullable=False),
        sa.Column("strictness", sa.String(length=16), nullable=False),
        sa.Column("rules", sa.JSON(), nullable=False),
        sa.Column("classifier", sa.String(length=200), nullable=True),
        sa.Column("thresholds", sa.JSON(), nullable=False),
        sa.Column("sync", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("created_by", sa.String(length=128), nullable=False),
        sa.PrimaryKeyConstraint("tenant", "version", name=op.f("pk_moderation_policies")),
    )
    op.create_table(
        "moderation_decisions",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("tenant", sa.String(length=64), nullable=False),
        sa.Column("stage", sa.String(length=8), nullable=False),
        sa.Column("disposition", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("categories", sa.JSON(), nullable=False),
        sa.Column("scores", sa.JSON(), nullable=False),
        sa.Column("policy_id", sa.String(length=32), nullable=False),
        sa.Column("policy_version", sa.Integer(), nullable=False),
        sa.Column("model", sa.String(length=193), nullable=False),
        sa.Column("version", sa.String(length=64), nullable=False),
        sa.Column("request_id", sa.String(length=128), nullable=False),
        sa.Column("job_id", sa.String(length=64), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_moderation_decisions")),
    )
    op.create_index("ix_moderation_decisions_tenant_id", "moderation_decisions", ["tenant", "id"])
    op.create_index(op.f("ix_moderation_decisions_job_id"), "moderation_decisions", ["job_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_moderation_decisions_job_id"), table_name="moderation_decisions")
    op.drop_index("ix_moderation_decisions_tenant_id", table_name="moderation_decisions")
    op.drop_table("moderation_decisions")
    op.drop_table("moderation_policies")
