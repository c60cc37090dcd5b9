"""jobs: durable jobs and their stages

Revision ID: 0014_jobs
Revises: 0013_format_decisions
Create Date: 2026-12-01 23:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014_jobs"
down_revision = "0013_format_decisions"
branch_labels = None
depends_on = None

_SEQ = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "jobs",
        sa.Column("seq", _SEQ, autoincrement=True, nullable=False),
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("tenant", sa.String(length=64), nullable=False),
        sa.Column("principal", sa.JSON(), nullable=False),
        sa.Column("target_kind", sa.String(length=16), nullable=False),
        sa.Column("target", sa.String(length=256), nullable=False),
        sa.Column("input_digest", sa.String(length=71), nullable=False),
        sa.Column("pipeline", sa.JSON(), nullable=False),
        sa.Column("webhook", sa.String(length=2048), nullable=True),
        sa.Column("idempotency_key", sa.String(length=256), nullable=True),
        sa.Column("fingerprint", sa.String(length=71), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("stage", sa.Integer(), nullable=False),
        sa.Column("cancel_requested", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("error_code", sa.String(length=64), nullable=True),
        sa.Column("error_message", sa.Text(), nullable=True),
        sa.Column("output_digest", sa.String(length=71), nullable=True),
        sa.Column("lease_owner", sa.String(length=64), nullable=True),
        sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("seq", name=op.f("pk_jobs")),
        sa.UniqueConstraint("id", name=op.f("uq_jobs_id")),
        sa.UniqueConstraint(
            "tenant", "idempotency_key", name=op.f("uq_jobs_tenant_idempotency_key")
        ),
    )
    op.create_index(
        "ix_jobs_state_lease_expires_at", "jobs", ["state", "lease_expires_at"], unique=False
    )
    op.create_index("ix_jobs_tenant_seq", "jobs", ["tenant", "seq"], unique=False)
    op.create_table(
        "job_stages",
        sa.Column("job_id", sa.String(length=32), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("implementation", sa.String(length=64), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("closed_attempts", sa.Integer(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("error_code", sa.String(length=64), nullable=True),
        sa.Column("error_message", sa.Text(), nullable=True),
        sa.Column("output_digest", sa.String(length=71), nullable=True),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_job_stages_job_id_jobs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("job_id", "position", name=op.f("pk_job_stages")),
    )


def downgrade() -> None:
    op.drop_table("job_stages")
    op.drop_index("ix_jobs_tenant_seq", table_name="jobs")
    op.drop_index("ix_jobs_state_lease_expires_at", table_name="jobs")
    op.drop_table("jobs")
