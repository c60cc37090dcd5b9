"""job lease generation: the fencing token every claim of a job increments

Revision ID: 0023_job_lease_generation
Revises: 0022_tenant_suspension
Create Date: 2026-12-04 23:55:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0023_job_lease_generation"
down_revision = "0022_tenant_suspension"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(
            sa.Column("lease_generation", sa.Integer(), nullable=False, server_default="0")
        )


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("lease_generation")
