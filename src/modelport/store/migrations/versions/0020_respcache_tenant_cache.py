"""tenant cache flags: a tenant may refuse the response cache or share it across tenants

Revision ID: 0020_respcache_tenant_cache
Revises: 0019_jobquota_limits
Create Date: 2026-12-03 08:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020_respcache_tenant_cache"
down_revision = "0019_jobquota_limits"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("tenants") as batch:
        batch.add_column(
            sa.Column("no_cache", sa.Boolean(), nullable=False, server_default=sa.false())
        )
        batch.add_column(
            sa.Column("shared_cache", sa.Boolean(), nullable=False, server_default=sa.false())
        )


def downgrade() -> None:
    with op.batch_alter_table("tenants") as batch:
        batch.drop_column("shared_cache")
        batch.drop_column("no_cache")
