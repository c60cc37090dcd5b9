"""prompt templates: versioned chat prompts with variables, as assets

Revision ID: 0031_prompt_templates
Revises: 0030_endpoint_monitors
Create Date: 2026-12-05 16:40:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0031_prompt_templates"
down_revision = "0030_endpoint_monitors"
branch_labels = None
depends_on = None

_TIME = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "prompt_templates",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("owner", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("visibility", sa.String(length=16), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("created_at", _TIME, nullable=False),
        sa.Column("created_by", sa.String(length=128), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_prompt_templates")),
        sa.UniqueConstraint("owner", "name", name=op.f("uq_prompt_templates_owner_name")),
    )
    op.create_index(op.f("ix_prompt_templates_owner"), "prompt_templates", ["owner"], unique=False)
    op.create_table(
        "prompt_template_versions",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("template_id", sa.Integer(), nullable=False),
        sa.Column("version", sa.String(length=64), nullable=False),
        sa.Column("digest", sa.String(length=71), nullable=False),
        sa.Column("license", sa.String(length=128), nullable=False),
        sa.Column("manifest", sa.JSON(), nullable=False),
        sa.Column("created_at", _TIME, nullable=False),
        sa.Column("created_by", sa.String(length=128), nullable=False),
        sa.ForeignKeyConstraint(
            ["template_id"],
            ["prompt_templates.id"],
            name=op.f("fk_prompt_template_versions_template_id_prompt_templates"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_prompt_template_versions")),
        sa.UniqueConstraint(
            "template_id", "version", name=op.f("uq_prompt_template_versions_template_id_version")
        ),
    )
    op.create_index(
        op.f("ix_prompt_template_versions_template_id"),
        "prompt_template_versions",
        ["template_id"],
        unique=False,
    )


def downgrade() -> None:
    op.drop_table("prompt_template_versions")
    op.drop_table("prompt_templates")
