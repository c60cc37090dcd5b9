"""installation id: namespaces shared Redis state (placeholder)

Revision ID: 0012_installation
Revises: 0011_blob_owners
Create Date: 2026-12-01 15:00:00
"""

from __future__ import annotations

revision = "0012_installation"
down_revision = "0011_blob_owners"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
