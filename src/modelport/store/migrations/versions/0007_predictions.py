"""predictions: the prediction log and delayed outcomes joined to it

Revision ID: 0007_predictions
Revises: 0006_billing
Create Date: 2026-11-30 09:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007_predictions"
down_revision = "0006_billing"
branch_labels = None
depends_on = None

_TIME = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "predictions",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("endpoint", sa.String(length=64), nullable=False),
        sa.Column("owner", sa.String(length=64), nullable=True),
        sa.Column("model", sa.String(length=193), nullable=True),
        sa.Column("version", sa.String(length=64), nullable=True),
        sa.Column("backend", sa.String(length=128), nullable=True),
        sa.Column("received_at", _TIME, nullable=False),
        sa.Column("latency_seconds", sa.Double(), nullable=False),
        sa.Column("stages", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(length=64), nullable=False),
        sa.Column("tenant", sa.String(length=64), nullable=True),
        sa.Column("key_id", sa.String(length=32), nullable=True),
        sa.Column("request_id", sa.String(length=128), nullable=False),
        sa.Column("fallback", sa.String(length=16), nullable=True),
        sa.Column("shadow_of", sa.String(length=64), nullable=True),
        sa.Column("arm", sa.String(length=64), nullable=True),
        sa.Column("answer_label", sa.String(length=256), nullable=True),
        sa.Column("answer_value", sa.Double(), nullable=True),
        sa.Column("inputs", sa.JSON(), nullable=True),
        sa.Column("outputs", sa.JSON(), nullable=True),
        sa.Column("detail", sa.String(length=16), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_predictions")),
    )
    op.create_index(
        "ix_predictions_endpoint_received_at", "predictions", ["endpoint", "received_at"]
    )
    op.create_index(op.f("ix_predictions_owner"), "predictions", ["owner"])
    op.create_index(op.f("ix_predictions_tenant"), "predictions", ["tenant"])
    op.create_index(op.f("ix_predictions_shadow_of"), "predictions", ["shadow_of"])
    op.create_table(
        "prediction_outcomes",
        sa.Column("prediction_id", sa.String(length=64), nullable=False),
        sa.Column("label", sa.String(length=256), nullable=True),
        sa.Column("value", sa.Double(), nullable=True),
        sa.Column("recorded_at", _TIME, nullable=False),
        sa.Column("recorded_by", sa.String(length=128), nullable=False),
        sa.PrimaryKeyConstraint("prediction_id", name=op.f("pk_prediction_outcomes")),
    )


def downgrade() -> None:
    op.drop_table("prediction_outcomes")
    op.drop_index(op.f("ix_predictions_shadow_of"), table_name="predictions")
    op.drop_index(op.f("ix_predictions_tenant"), table_name="predictions")
    op.drop_index(op.f("ix_predictions_owner"), table_name="predictions")
    op.drop_index("ix_predictions_endpoint_received_at", table_name="predictions")
    op.drop_table("predictions")
