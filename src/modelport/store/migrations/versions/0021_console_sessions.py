"""console sessions: the web console's signed-in sessions, their credential sealed

Revision ID: 0021_console_sessions
Revises: 0020_respcache_tenant_cache
Create Date: 2026-12-03 09:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0021_console_sessions"
down_revision = "0020_respcache_tenant_cache"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "console_sessions",
        sa.Column("id_hash", sa.String(length=64), nullable=False),
        sa.Column("credential", sa.Text(), nullable=False),
        sa.Column("tenant", sa.String(length=64), nullable=True),
        sa.Column("csrf_token", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id_hash", name=op.f("pk_console_sessions")),
    )
    op.create_index(op.f("ix_console_sessions_expires_at"), "console_sessions", ["expires_at"])


def downgrade() -> None:
    op.drop_index(op.f("ix_console_sessions_expires_at"), table_name="console_sessions")
    op.drop_table("console_sessions")
