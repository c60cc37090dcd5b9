"""prediction sampling: the share of direct version calls the prediction log keeps

Revision ID: 0035_prediction_sampling
Revises: 0034_degradation
Create Date: 2026-12-05 19:45:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0035_prediction_sampling"
down_revision = "0034_degradation"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "prediction_sampling",
        sa.Column("scope", sa.String(16), primary_key=True),
        sa.Column("subject", sa.String(258), primary_key=True),
        sa.Column("rate", sa.Double(), nullable=False),
        sa.Column("payloads", sa.Boolean(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_by", sa.String(128), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("prediction_sampling")
