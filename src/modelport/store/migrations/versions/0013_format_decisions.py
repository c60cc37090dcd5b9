"""format decisions: operator approvals of formats the platform does not run (placeholder)

Revision ID: 0013_format_decisions
Revises: 0012_installation
Create Date: 2026-12-01 15:00:00
"""

from __future__ import annotations

revision = "0013_format_decisions"
down_revision = "0012_installation"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
