"""usage authorizations: who may report usage against whom (placeholder)

Revision ID: 0010_usage_authorizations
Revises: 0009_remote_backends
Create Date: 2026-12-01 15:00:00
"""

from __future__ import annotations

revision = "0010_usage_authorizations"
down_revision = "0009_remote_backends"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
