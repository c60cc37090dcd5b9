"""erasure and GPU time: a job's inputs and outputs erased by retention or the right to
deletion; a usage event's GPU milliseconds

Revision ID: 0033_erasure_gpu_time
Revises: 0032_endpoint_evaluations
Create Date: 2026-12-05 19:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0033_erasure_gpu_time"
down_revision = "0032_endpoint_evaluations"
branch_labels = None
depends_on = None

_TIME = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.add_column("jobs", sa.Column("erased_at", _TIME, nullable=True))
    # The sweep looks for finished jobs not erased yet, by age.
    op.create_index("ix_jobs_erasable", "jobs", ["erased_at", "finished_at"])
    op.create_table(
        "blob_erasures",
        sa.Column("digest", sa.String(71), primary_key=True),
        sa.Column("tenant", sa.String(64), primary_key=True),
        sa.Column("queued_at", _TIME, nullable=False),
    )
    op.add_column(
        "usage_events", sa.Column("gpu_ms", sa.Float(), nullable=False, server_default="0")
    )


def downgrade() -> None:
    op.drop_column("usage_events", "gpu_ms")
    op.drop_table("blob_erasures")
    op.drop_index("ix_jobs_erasable", table_name="jobs")
    op.drop_column("jobs", "erased_at")
