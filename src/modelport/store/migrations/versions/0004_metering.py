"""metering: price book, usage outbox, usage ledger, balances, reservations; budgets hold
reservations

Revision ID: 0004_metering
Revises: 0003_limits
Create Date: 2026-11-30 06:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004_metering"
down_revision = "0003_limits"
branch_labels = None
depends_on = None

_TIME = sa.DateTime(timezone=True)
_SEQ = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    with op.batch_alter_table("budgets") as batch:
        batch.add_column(
            sa.Column("reserved_micros", sa.BigInteger(), nullable=False, server_default="0")
        )
    op.create_table(
        "price_rules",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("model", sa.String(length=193), nullable=False),
        sa.Column("version", sa.String(length=64), nullable=True),
        sa.Column("unit", sa.String(length=16), nullable=False),
        sa.Column("unit_price_micros", sa.BigInteger(), nullable=False),
        sa.Column("per_units", sa.BigInteger(), nullable=False),
        sa.Column("revenue_share_bps", sa.Integer(), nullable=False),
        sa.Column("failure_rule", sa.String(length=16), nullable=False),
        sa.Column("failure_bps", sa.Integer(), nullable=False),
        sa.Column("effective_from", _TIME, nullable=False),
        sa.Column("created_at", _TIME, nullable=False),
        sa.Column("created_by", sa.String(length=128), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_price_rules")),
    )
    op.create_index("ix_price_rules_model_unit", "price_rules", ["model", "unit", "effective_from"])
    op.create_table(
        "usage_outbox",
        sa.Column("id", _SEQ, autoincrement=True, nullable=False),
        sa.Column("event_id", sa.String(length=128), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("created_at", _TIME, nullable=False),
        sa.Column("claimed_until", _TIME, nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_usage_outbox")),
    )
    op.create_index(op.f("ix_usage_outbox_claimed_until"), "usage_outbox", ["claimed_until"])
    op.create_table(
        "usage_events",
        sa.Column("seq", _SEQ, autoincrement=True, nullable=False),
        sa.Column("event_id", sa.String(length=128), nullable=False),
        sa.Column("tenant", sa.String(length=64), nullable=False),
        sa.Column("key_id", sa.String(length=32), nullable=True),
        sa.Column("model", sa.String(length=193), nullable=False),
        sa.Column("version", sa.String(length=64), nullable=False),
        sa.Column("manifest_digest", sa.String(length=71), nullable=False),
        sa.Column("endpoint", sa.String(length=128), nullable=True),
        sa.Column("task", sa.String(length=64), nullable=False),
        sa.Column("unit", sa.String(length=16), nullable=False),
        sa.Column("quantity", sa.BigInteger(), nullable=False),
        sa.Column("compute_ms", sa.Float(), nullable=False),
        sa.Column("wall_ms", sa.Float(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("started_at", _TIME, nullable=False),
        sa.Column("finished_at", _TIME, nullable=False),
        sa.Column("request_id", sa.String(length=128), nullable=False),
        sa.Column("prediction_id", sa.String(length=128), nullable=False),
        sa.Column("price_rule_id", sa.Integer(), nullable=True),
        sa.Column("unit_price_micros", sa.BigInteger(), nullable=False),
        sa.Column("per_units", sa.BigInteger(), nullable=False),
        sa.Column("failure_rule", sa.String(length=16), nullable=False),
        sa.Column("failure_bps", sa.Integer(), nullable=False),
        sa.Column("revenue_share_bps", sa.Integer(), nullable=False),
        sa.Column("amount_micros", sa.BigInteger(), nullable=False),
        sa.Column("publisher", sa.String(length=64), nullable=False),
        sa.Column("publisher_micros", sa.BigInteger(), nullable=False),
        sa.Column("source", sa.String(length=256), nullable=False),
        sa.Column("reservation_id", sa.String(length=32), nullable=True),
        sa.Column("recorded_at", _TIME, nullable=False),
        sa.PrimaryKeyConstraint("seq", name=op.f("pk_usage_events")),
        sa.UniqueConstraint("event_id", name=op.f("uq_usage_events_event_id")),
    )
    for column in ("tenant", "model", "finished_at", "publisher"):
        op.create_index(op.f(f"ix_usage_events_{column}"), "usage_events", [column])
    op.create_table(
        "balances",
        sa.Column("scope_type", sa.String(length=16), nullable=False),
        sa.Column("scope_id", sa.String(length=256), nullable=False),
        sa.Column("tenant", sa.String(length=64), nullable=False),
        sa.Column("balance_micros", sa.BigInteger(), nullable=False),
        sa.Column("reserved_micros", sa.BigInteger(), nullable=False),
        sa.Column("overdraft_micros", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", _TIME, nullable=False),
        sa.PrimaryKeyConstraint("scope_type", "scope_id", name=op.f("pk_balances")),
    )
    op.create_index(op.f("ix_balances_tenant"), "balances", ["tenant"])
    op.create_table(
        "reservations",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("tenant", sa.String(length=64), nullable=False),
        sa.Column("key_id", sa.String(length=32), nullable=True),
        sa.Column("amount_micros", sa.BigInteger(), nullable=False),
        sa.Column("levels", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("created_at", _TIME, nullable=False),
        sa.Column("expires_at", _TIME, nullable=False),
        sa.Column("settled_micros", sa.BigInteger(), nullable=True),
        sa.Column("settled_at", _TIME, nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_reservations")),
    )
    op.create_index(op.f("ix_reservations_tenant"), "reservations", ["tenant"])
    op.create_index("ix_reservations_state_expires", "reservations", ["state", "expires_at"])


def downgrade() -> None:
    op.drop_table("reservations")
    op.drop_table("balances")
    op.drop_table("usage_events")
    op.drop_table("usage_outbox")
    op.drop_table("price_rules")
    with op.batch_alter_table("budgets") as batch:
        batch.drop_column("reserved_micros")
