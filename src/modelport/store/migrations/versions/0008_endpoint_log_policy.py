"""endpoint log policy: what the prediction log may keep of an endpoint's predictions

Revision ID: 0008_endpoint_log_policy
Revises: 0007_predictions
Create Date: 2026-11-30 09:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008_endpoint_log_policy"
down_revision = "0007_predictions"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("endpoints") as batch:
        batch.add_column(sa.Column("log_policy", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("endpoints") as batch:
        batch.drop_column("log_policy")
