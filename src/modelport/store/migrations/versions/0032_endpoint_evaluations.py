"""evaluations of endpoints, and each evaluation's leaderboard score as a column

An evaluation may name the endpoint it called (``endpoint``) and records the versions
that served its rows (``served``). ``score`` and ``higher_is_better`` hold the task's
leaderboard metric of a verified evaluation that counts as one version's score (the
catalog's score facet and filter read them); existing verified results are backfilled
from their metrics.

Revision ID: 0032_endpoint_evaluations
Revises: 0031_prompt_templates
Create Date: 2026-12-05 19:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0032_endpoint_evaluations"
down_revision = "0031_prompt_templates"
branch_labels = None
depends_on = None

# The leaderboard metric of each task as this revision knows it (frozen here: a later
# change of the code's table must not rewrite history).
_PRIMARY = {
    "classification": ("accuracy", True),
    "regression": ("mae", False),
    "chat": ("exact_match", True),
    "embedding": ("recall_at_1", True),
}


def upgrade() -> None:
    with op.batch_alter_table("evaluations") as batch:
        batch.add_column(sa.Column("endpoint", sa.String(length=64), nullable=True))
        batch.add_column(sa.Column("served", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("score", sa.Float(), nullable=True))
        batch.add_column(sa.Column("higher_is_better", sa.Boolean(), nullable=True))
    evaluations = sa.table(
        "evaluations",
        sa.column("id", sa.String),
        sa.column("kind", sa.String),
        sa.column("state", sa.String),
        sa.column("task", sa.String),
        sa.column("metrics", sa.JSON),
        sa.column("score", sa.Float),
        sa.column("higher_is_better", sa.Boolean),
    )
    connection = op.get_bind()
    found = connection.execute(
        sa.select(evaluations.c.id, evaluations.c.task, evaluations.c.metrics).where(
            evaluations.c.kind == "verified", evaluations.c.state == "succeeded"
        )
    )
    for ident, task, metrics in list(found):
        metric, higher = _PRIMARY.get(task, ("", True))
        value = (metrics or {}).get(metric)
        if value is None:
            continue
        connection.execute(
            sa.update(evaluations)
            .where(evaluations.c.id == ident)
            .values(score=float(value), higher_is_better=higher)
        )


def downgrade() -> None:
    with op.batch_alter_table("evaluations") as batch:
        batch.drop_column("higher_is_better")
        batch.drop_column("score")
        batch.drop_column("served")
        batch.drop_column("endpoint")
