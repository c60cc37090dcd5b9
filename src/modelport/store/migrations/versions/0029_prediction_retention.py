"""prediction retention: how long each tenant's prediction log is kept

Revision ID: 0029_prediction_retention
Revises: 0028_endpoint_slos
Create Date: 2026-12-05 16:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0029_prediction_retention"
down_revision = "0028_endpoint_slos"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "prediction_retention",
        sa.Column("tenant", sa.String(64), primary_key=True),
        sa.Column("days", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_by", sa.String(128), nullable=False),
    )
    # The sweep deletes by age: received_at indexed (the endpoint index leads by endpoint).
    op.create_index("ix_predictions_received_at", "predictions", ["received_at"])


def downgrade() -> None:
    op.drop_index("ix_predictions_received_at", table_name="predictions")
    op.drop_table("prediction_retention")
