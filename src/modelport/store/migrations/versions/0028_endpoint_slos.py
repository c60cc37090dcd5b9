"""endpoint slos: the service level objectives of an endpoint's definition

Revision ID: 0028_endpoint_slos
Revises: 0027_worker_placements
Create Date: 2026-12-05 16:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0028_endpoint_slos"
down_revision = "0027_worker_placements"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("endpoints") as batch:
        batch.add_column(sa.Column("slos", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("endpoints") as batch:
        batch.drop_column("slos")
