"""usage authorizations: who may report usage against whom; reservations name their model
and what was reported against them

Revision ID: 0010_usage_authorizations
Revises: 0009_remote_backends
Create Date: 2026-12-01 15:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010_usage_authorizations"
down_revision = "0009_remote_backends"
branch_labels = None
depends_on = None

_TIME = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "usage_authorizations",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("consumer", sa.String(length=64), nullable=False),
        sa.Column("publisher", sa.String(length=64), nullable=False),
        sa.Column("model", sa.String(length=128), nullable=True),
        sa.Column("cap_micros", sa.BigInteger(), nullable=False),
        sa.Column("spent_micros", sa.BigInteger(), nullable=False),
        sa.Column("expires_at", _TIME, nullable=True),
        sa.Column("created_at", _TIME, nullable=False),
        sa.Column("created_by", sa.String(length=128), nullable=False),
        sa.Column("withdrawn_at", _TIME, nullable=True),
        sa.Column("withdrawn_by", sa.String(length=128), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_usage_authorizations")),
    )
    op.create_index(
        "ix_usage_authorizations_consumer_publisher",
        "usage_authorizations",
        ["consumer", "publisher"],
        unique=False,
    )
    op.create_index(
        op.f("ix_usage_authorizations_publisher"),
        "usage_authorizations",
        ["publisher"],
        unique=False,
    )
    op.add_column("reservations", sa.Column("model", sa.String(length=128), nullable=True))
    op.add_column("reservations", sa.Column("reported_micros", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("reservations") as batch:
        batch.drop_column("reported_micros")
        batch.drop_column("model")
    op.drop_index(op.f("ix_usage_authorizations_publisher"), table_name="usage_authorizations")
    op.drop_index("ix_usage_authorizations_consumer_publisher", table_name="usage_authorizations")
    op.drop_table("usage_authorizations")
