"""format decisions: operator approvals of formats the platform does not run

Revision ID: 0013_format_decisions
Revises: 0012_installation
Create Date: 2026-12-01 15:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013_format_decisions"
down_revision = "0012_installation"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "format_decisions",
        sa.Column("format", sa.String(length=32), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("decided_by", sa.String(length=128), nullable=False),
        sa.Column("decided_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("format", name=op.f("pk_format_decisions")),
    )


def downgrade() -> None:
    op.drop_table("format_decisions")
