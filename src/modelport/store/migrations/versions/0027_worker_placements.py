"""worker placements: the replicas of deployed versions placed on the pool's workers

Revision ID: 0027_worker_placements
Revises: 0026_catalog_search_fts
Create Date: 2026-12-05 16:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0027_worker_placements"
down_revision = "0026_catalog_search_fts"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "worker_placements",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("ref", sa.String(256), nullable=False),
        sa.Column("manifest_digest", sa.String(71), nullable=False),
        sa.Column("worker_id", sa.String(128), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("memory_bytes", sa.BigInteger(), nullable=False),
        sa.Column("cause", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("ref", "worker_id", name="uq_worker_placements_ref_worker"),
    )
    op.create_index("ix_worker_placements_worker", "worker_placements", ["worker_id"])


def downgrade() -> None:
    op.drop_index("ix_worker_placements_worker", table_name="worker_placements")
    op.drop_table("worker_placements")
