"""remote backends: remote inference servers that deployments may run versions on

Revision ID: 0009_remote_backends
Revises: 0008_endpoint_log_policy
Create Date: 2026-12-01 09:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009_remote_backends"
down_revision = "0008_endpoint_log_policy"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "remote_backends",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("name", sa.String(length=63), nullable=False),
        sa.Column("tenant", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("api_key", sa.Text(), nullable=True),
        sa.Column("capabilities", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("created_by", sa.String(length=128), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_remote_backends")),
        sa.UniqueConstraint("name", name=op.f("uq_remote_backends_name")),
    )
    op.create_index(op.f("ix_remote_backends_tenant"), "remote_backends", ["tenant"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_remote_backends_tenant"), table_name="remote_backends")
    op.drop_table("remote_backends")
