"""endpoint monitors: the drift and quality monitor policy of an endpoint

Revision ID: 0030_endpoint_monitors
Revises: 0029_prediction_retention
Create Date: 2026-12-05 16:20:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0030_endpoint_monitors"
down_revision = "0029_prediction_retention"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "endpoint_monitors",
        sa.Column("endpoint", sa.String(63), primary_key=True),
        sa.Column("policy", sa.JSON(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_by", sa.String(128), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("endpoint_monitors")
