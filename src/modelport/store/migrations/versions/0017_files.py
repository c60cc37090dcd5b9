"""files: a tenant's uploaded files (batch inputs)

Revision ID: 0017_files
Revises: 0016_moderation
Create Date: 2026-12-01 23:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017_files"
down_revision = "0016_moderation"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "files",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("tenant", sa.String(length=64), nullable=False),
        sa.Column("purpose", sa.String(length=32), nullable=False),
        sa.Column("filename", sa.String(length=255), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("digest", sa.String(length=71), nullable=False),
        sa.Column("lines", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_files")),
    )
    op.create_index(
        "ix_files_tenant_created", "files", ["tenant", "created_at", "id"], unique=False
    )


def downgrade() -> None:
    op.drop_index("ix_files_tenant_created", table_name="files")
    op.drop_table("files")
