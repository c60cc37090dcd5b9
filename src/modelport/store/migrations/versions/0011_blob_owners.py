"""blob possession: which tenants uploaded or may read a blob (placeholder)

Revision ID: 0011_blob_owners
Revises: 0010_usage_authorizations
Create Date: 2026-12-01 15:00:00
"""

from __future__ import annotations

revision = "0011_blob_owners"
down_revision = "0010_usage_authorizations"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
