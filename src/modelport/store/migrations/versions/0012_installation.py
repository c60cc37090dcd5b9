"""installation id: namespaces shared Redis state

Revision ID: 0012_installation
Revises: 0011_blob_owners
Create Date: 2026-12-01 15:00:00
"""

from __future__ import annotations

import secrets
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision = "0012_installation"
down_revision = "0011_blob_owners"
branch_labels = None
depends_on = None


def upgrade() -> None:
    installation = op.create_table(
        "installation",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_installation")),
    )
    # Made once, here: every process of this installation reads the same id.
    op.bulk_insert(installation, [{"id": secrets.token_hex(8), "created_at": datetime.now(UTC)}])


def downgrade() -> None:
    op.drop_table("installation")
