"""jobquota limits: a tenant's job quota and job concurrency, and jobs by tenant and state

Revision ID: 0019_jobquota_limits
Revises: 0018_batches
Create Date: 2026-12-03 07:45:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019_jobquota_limits"
down_revision = "0018_batches"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("limits") as batch:
        batch.add_column(sa.Column("jobs", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("job_concurrency", sa.Integer(), nullable=True))
    op.create_index("ix_jobs_tenant_state", "jobs", ["tenant", "state"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_jobs_tenant_state", table_name="jobs")
    with op.batch_alter_table("limits") as batch:
        batch.drop_column("job_concurrency")
        batch.drop_column("jobs")
