"""degradation: a tenant's tier and an endpoint's degradation policy under load

Revision ID: 0034_degradation
Revises: 0033_erasure_gpu_time
Create Date: 2026-12-05 19:20:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0034_degradation"
down_revision = "0033_erasure_gpu_time"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("tenants") as batch:
        batch.add_column(
            sa.Column("tier", sa.String(16), nullable=False, server_default="standard")
        )
    with op.batch_alter_table("endpoints") as batch:
        batch.add_column(sa.Column("degradation", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("endpoints") as batch:
        batch.drop_column("degradation")
    with op.batch_alter_table("tenants") as batch:
        batch.drop_column("tier")
