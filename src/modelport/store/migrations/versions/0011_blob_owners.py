"""blob possession: which tenants hold a blob's bytes, and who started each upload

Revision ID: 0011_blob_owners
Revises: 0010_usage_authorizations
Create Date: 2026-12-01 15:00:00

Possession is backfilled from the versions published so far: the owner of every model
with a version listing a blob is recorded as holding it, so an upgrade keeps today's
versions readable and publishable from.
"""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision = "0011_blob_owners"
down_revision = "0010_usage_authorizations"
branch_labels = None
depends_on = None


def upgrade() -> None:
    owners = op.create_table(
        "blob_owners",
        sa.Column("digest", sa.String(length=71), nullable=False),
        sa.Column("tenant", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("digest", "tenant", name=op.f("pk_blob_owners")),
    )
    with op.batch_alter_table("uploads") as batch:
        batch.add_column(sa.Column("tenant", sa.String(length=64), nullable=True))

    files = sa.table("version_files", sa.column("version_id"), sa.column("digest"))
    versions = sa.table("model_versions", sa.column("id"), sa.column("model_id"))
    models = sa.table("models", sa.column("id"), sa.column("owner"))
    now = sa.bindparam("now", datetime.now(UTC), type_=sa.DateTime(timezone=True))
    pairs = (
        sa.select(files.c.digest, models.c.owner)
        .select_from(
            files.join(versions, versions.c.id == files.c.version_id).join(
                models, models.c.id == versions.c.model_id
            )
        )
        .distinct()
        .subquery()
    )
    held = sa.select(pairs.c.digest, pairs.c.owner, now)
    op.execute(sa.insert(owners).from_select(["digest", "tenant", "created_at"], held))


def downgrade() -> None:
    with op.batch_alter_table("uploads") as batch:
        batch.drop_column("tenant")
    op.drop_table("blob_owners")
