"""limits: rate and concurrency limits per tenant, key and model; budgets and their alerts

Revision ID: 0003_limits
Revises: 0002_tenancy
Create Date: 2026-11-30 04:10:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003_limits"
down_revision = "0002_tenancy"
branch_labels = None
depends_on = None

_TIME = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "limits",
        sa.Column("scope_type", sa.String(length=16), nullable=False),
        sa.Column("scope_id", sa.String(length=256), nullable=False),
        sa.Column("tenant", sa.String(length=64), nullable=True),
        sa.Column("rpm", sa.Integer(), nullable=True),
        sa.Column("concurrency", sa.Integer(), nullable=True),
        sa.Column("tpm", sa.BigInteger(), nullable=True),
        sa.Column("updated_at", _TIME, nullable=False),
        sa.Column("updated_by", sa.String(length=128), nullable=False),
        sa.PrimaryKeyConstraint("scope_type", "scope_id", name=op.f("pk_limits")),
    )
    op.create_index(op.f("ix_limits_tenant"), "limits", ["tenant"], unique=False)
    op.create_table(
        "budgets",
        sa.Column("tenant", sa.String(length=64), nullable=False),
        sa.Column("hard_cap_micros", sa.BigInteger(), nullable=True),
        sa.Column("soft_cap_micros", sa.BigInteger(), nullable=True),
        sa.Column("spent_micros", sa.BigInteger(), nullable=False),
        sa.Column("period", sa.String(length=7), nullable=False),
        sa.Column("updated_at", _TIME, nullable=False),
        sa.PrimaryKeyConstraint("tenant", name=op.f("pk_budgets")),
    )
    op.create_table(
        "budget_alerts",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("tenant", sa.String(length=64), nullable=False),
        sa.Column("period", sa.String(length=7), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("spent_micros", sa.BigInteger(), nullable=False),
        sa.Column("cap_micros", sa.BigInteger(), nullable=False),
        sa.Column("created_at", _TIME, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_budget_alerts")),
        sa.UniqueConstraint(
            "tenant", "period", "kind", name=op.f("uq_budget_alerts_tenant_period_kind")
        ),
    )


def downgrade() -> None:
    op.drop_table("budget_alerts")
    op.drop_table("budgets")
    op.drop_index(op.f("ix_limits_tenant"), table_name="limits")
    op.drop_table("limits")
