"""trace context: the W3C trace context a job and a webhook delivery carry on

Revision ID: 0025_trace_context
Revises: 0024_eval_datasets_evaluations
Create Date: 2026-12-05 13:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0025_trace_context"
down_revision = "0024_eval_datasets_evaluations"
branch_labels = None
depends_on = None


def upgrade() -> None:
    for table in ("jobs", "webhook_deliveries"):
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("trace_context", sa.JSON(), nullable=True))


def downgrade() -> None:
    for table in ("jobs", "webhook_deliveries"):
        with op.batch_alter_table(table) as batch:
            batch.drop_column("trace_context")
