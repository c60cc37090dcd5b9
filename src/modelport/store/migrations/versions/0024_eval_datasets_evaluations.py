"""datasets as assets, and evaluations (verified and claimed) for leaderboards

Revision ID: 0024_eval_datasets_evaluations
Revises: 0023_job_lease_generation
Create Date: 2026-12-05 13:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0024_eval_datasets_evaluations"
down_revision = "0023_job_lease_generation"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "datasets",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("owner", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("visibility", sa.String(length=16), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("created_by", sa.String(length=128), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_datasets")),
        sa.UniqueConstraint("owner", "name", name=op.f("uq_datasets_owner_name")),
    )
    op.create_index(op.f("ix_datasets_owner"), "datasets", ["owner"], unique=False)
    op.create_table(
        "dataset_versions",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("dataset_id", sa.Integer(), nullable=False),
        sa.Column("version", sa.String(length=64), nullable=False),
        sa.Column("digest", sa.String(length=71), nullable=False),
        sa.Column("task", sa.String(length=16), nullable=False),
        sa.Column("license", sa.String(length=128), nullable=False),
        sa.Column("manifest", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("created_by", sa.String(length=128), nullable=False),
        sa.ForeignKeyConstraint(
            ["dataset_id"], ["datasets.id"], name=op.f("fk_dataset_versions_dataset_id_datasets")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_dataset_versions")),
        sa.UniqueConstraint(
            "dataset_id", "version", name=op.f("uq_dataset_versions_dataset_id_version")
        ),
    )
    op.create_index(
        op.f("ix_dataset_versions_dataset_id"), "dataset_versions", ["dataset_id"], unique=False
    )
    op.create_table(
        "evaluations",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("tenant", sa.String(length=64), nullable=False),
        sa.Column("created_by", sa.String(length=128), nullable=False),
        sa.Column("job_id", sa.String(length=32), nullable=True),
        sa.Column("model_owner", sa.String(length=64), nullable=False),
        sa.Column("model_name", sa.String(length=128), nullable=False),
        sa.Column("model_version", sa.String(length=64), nullable=False),
        sa.Column("version_digest", sa.String(length=71), nullable=False),
        sa.Column("dataset_owner", sa.String(length=64), nullable=False),
        sa.Column("dataset_name", sa.String(length=128), nullable=False),
        sa.Column("dataset_version", sa.String(length=64), nullable=False),
        sa.Column("dataset_digest", sa.String(length=71), nullable=False),
        sa.Column("split", sa.String(length=64), nullable=False),
        sa.Column("task", sa.String(length=16), nullable=False),
        sa.Column("output", sa.String(length=128), nullable=False),
        sa.Column("published", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("metrics", sa.JSON(), nullable=True),
        sa.Column("rows", sa.Integer(), nullable=True),
        sa.Column("latency_ms", sa.Float(), nullable=True),
        sa.Column("error_code", sa.String(length=64), nullable=True),
        sa.Column("error_message", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_evaluations")),
        sa.UniqueConstraint("job_id", name=op.f("uq_evaluations_job_id")),
    )
    op.create_index(op.f("ix_evaluations_tenant"), "evaluations", ["tenant"], unique=False)
    op.create_index(
        "ix_evaluations_board",
        "evaluations",
        ["task", "dataset_owner", "dataset_name", "state"],
        unique=False,
    )
    op.create_index(
        "ix_evaluations_model", "evaluations", ["model_owner", "model_name"], unique=False
    )


def downgrade() -> None:
    op.drop_index("ix_evaluations_model", table_name="evaluations")
    op.drop_index("ix_evaluations_board", table_name="evaluations")
    op.drop_index(op.f("ix_evaluations_tenant"), table_name="evaluations")
    op.drop_table("evaluations")
    op.drop_index(op.f("ix_dataset_versions_dataset_id"), table_name="dataset_versions")
    op.drop_table("dataset_versions")
    op.drop_index(op.f("ix_datasets_owner"), table_name="datasets")
    op.drop_table("datasets")
