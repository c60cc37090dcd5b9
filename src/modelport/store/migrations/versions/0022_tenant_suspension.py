"""tenant suspension: when and why the operator suspended a tenant

Revision ID: 0022_tenant_suspension
Revises: 0021_console_sessions
Create Date: 2026-12-03 15:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0022_tenant_suspension"
down_revision = "0021_console_sessions"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("tenants") as batch:
        batch.add_column(sa.Column("suspended_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(
            sa.Column("suspension_reason", sa.String(length=256), nullable=False, server_default="")
        )


def downgrade() -> None:
    with op.batch_alter_table("tenants") as batch:
        batch.drop_column("suspension_reason")
        batch.drop_column("suspended_at")
