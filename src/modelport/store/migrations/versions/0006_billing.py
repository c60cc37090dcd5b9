"""billing: invoices and their lines, credit notes, publisher statements; the ledger by
recording time; finalised documents and credit notes are immutable in the database

Revision ID: 0006_billing
Revises: 0005_serving
Create Date: 2026-11-30 08:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006_billing"
down_revision = "0005_serving"
branch_labels = None
depends_on = None

_TIME = sa.DateTime(timezone=True)

# A finalised invoice or statement, its lines, and every credit note are immutable:
# the service has no path that changes them, and the database refuses one too.
_DOCUMENTS = (
    ("invoices", "invoice_lines", "invoice_id"),
    ("statements", "statement_lines", "statement_id"),
)
_APPEND_ONLY = ("credit_notes", "credit_note_lines")

_PG_FUNCTIONS = """
CREATE FUNCTION billing_refuse() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION USING MESSAGE = TG_TABLE_NAME || ' is append-only';
END;
$$ LANGUAGE plpgsql;

CREATE FUNCTION billing_finalized_document() RETURNS trigger AS $$
BEGIN
    IF OLD.status = 'finalized' THEN
        RAISE EXCEPTION USING MESSAGE = 'finalized rows of ' || TG_TABLE_NAME || ' are immutable';
    END IF;
    IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;

CREATE FUNCTION invoice_lines_finalized() RETURNS trigger AS $$
BEGIN
    IF (SELECT status FROM invoices
        WHERE id = CASE WHEN TG_OP = 'INSERT' THEN NEW.invoice_id ELSE OLD.invoice_id END) = 'finalized'
    THEN
        RAISE EXCEPTION 'the lines of a finalized invoice are immutable';
    END IF;
    IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;

CREATE FUNCTION statement_lines_finalized() RETURNS trigger AS $$
BEGIN
    IF (SELECT status FROM statements
        WHERE id = CASE WHEN TG_OP = 'INSERT' THEN NEW.statement_id ELSE OLD.statement_id END) = 'finalized'
    THEN
        RAISE EXCEPTION 'the lines of a finalized statement are immutable';
    END IF;
    IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
"""


def _pg_triggers() -> list[str]:
    statements = []
    for table, lines, _fk in _DOCUMENTS:
        statements.append(
            f"CREATE TRIGGER {table}_finalized BEFORE UPDATE OR DELETE ON {table} "
            f"FOR EACH ROW EXECUTE FUNCTION billing_finalized_document()"
        )
        statements.append(
            f"CREATE TRIGGER {lines}_finalized BEFORE INSERT OR UPDATE OR DELETE ON {lines} "
            f"FOR EACH ROW EXECUTE FUNCTION {lines}_finalized()"
        )
    for table in _APPEND_ONLY:
        statements.append(
            f"CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table} "
            f"FOR EACH ROW EXECUTE FUNCTION billing_refuse()"
        )
    return statements


def _sqlite_triggers() -> list[str]:
    statements = []
    for table, lines, fk in _DOCUMENTS:
        for verb in ("update", "delete"):
            statements.append(
                f"CREATE TRIGGER {table}_finalized_no_{verb} BEFORE {verb.upper()} ON {table} "
                f"WHEN OLD.status = 'finalized' "
                f"BEGIN SELECT RAISE(ABORT, 'a finalized {table[:-1]} is immutable'); END"
            )
        for verb, row in (("insert", "NEW"), ("update", "OLD"), ("delete", "OLD")):
            statements.append(
                f"CREATE TRIGGER {lines}_finalized_no_{verb} BEFORE {verb.upper()} ON {lines} "
                f"WHEN (SELECT status FROM {table} WHERE id = {row}.{fk}) = 'finalized' "
                f"BEGIN SELECT RAISE(ABORT, 'the lines of a finalized {table[:-1]} are "
                f"immutable'); END"
            )
    for table in _APPEND_ONLY:
        for verb in ("update", "delete"):
            statements.append(
                f"CREATE TRIGGER {table}_no_{verb} BEFORE {verb.upper()} ON {table} "
                f"BEGIN SELECT RAISE(ABORT, '{table} is append-only'); END"
            )
    return statements


def upgrade() -> None:
    op.create_index("ix_usage_events_recorded_at", "usage_events", ["recorded_at"])
    op.create_table(
        "invoices",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("tenant", sa.String(length=64), nullable=False),
        sa.Column("period", sa.String(length=7), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("total_micros", sa.BigInteger(), nullable=False),
        sa.Column("events", sa.BigInteger(), nullable=False),
        sa.Column("generated_at", _TIME, nullable=False),
        sa.Column("finalized_at", _TIME, nullable=True),
        sa.Column("finalized_by", sa.String(length=128), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_invoices")),
        sa.UniqueConstraint("tenant", "period", name=op.f("uq_invoices_tenant_period")),
    )
    op.create_index(op.f("ix_invoices_period"), "invoices", ["period"])
    op.create_table(
        "invoice_lines",
        sa.Column("invoice_id", sa.Integer(), nullable=False),
        sa.Column("line_no", sa.Integer(), nullable=False),
        sa.Column("model", sa.String(length=193), nullable=False),
        sa.Column("version", sa.String(length=64), nullable=False),
        sa.Column("unit", sa.String(length=16), nullable=False),
        sa.Column("price_rule_id", sa.Integer(), nullable=True),
        sa.Column("unit_price_micros", sa.BigInteger(), nullable=False),
        sa.Column("per_units", sa.BigInteger(), nullable=False),
        sa.Column("charge_bps", sa.Integer(), nullable=False),
        sa.Column("events", sa.BigInteger(), nullable=False),
        sa.Column("quantity", sa.BigInteger(), nullable=False),
        sa.Column("amount_micros", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["invoice_id"], ["invoices.id"], name=op.f("fk_invoice_lines_invoice_id_invoices")
        ),
        sa.PrimaryKeyConstraint("invoice_id", "line_no", name=op.f("pk_invoice_lines")),
    )
    op.create_table(
        "credit_notes",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("invoice_id", sa.Integer(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("total_micros", sa.BigInteger(), nullable=False),
        sa.Column("created_at", _TIME, nullable=False),
        sa.Column("created_by", sa.String(length=128), nullable=False),
        sa.ForeignKeyConstraint(
            ["invoice_id"], ["invoices.id"], name=op.f("fk_credit_notes_invoice_id_invoices")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_credit_notes")),
    )
    op.create_index(op.f("ix_credit_notes_invoice_id"), "credit_notes", ["invoice_id"])
    op.create_table(
        "credit_note_lines",
        sa.Column("credit_note_id", sa.Integer(), nullable=False),
        sa.Column("line_no", sa.Integer(), nullable=False),
        sa.Column("invoice_line", sa.Integer(), nullable=True),
        sa.Column("description", sa.String(length=512), nullable=False),
        sa.Column("amount_micros", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["credit_note_id"],
            ["credit_notes.id"],
            name=op.f("fk_credit_note_lines_credit_note_id_credit_notes"),
        ),
        sa.PrimaryKeyConstraint("credit_note_id", "line_no", name=op.f("pk_credit_note_lines")),
    )
    op.create_table(
        "statements",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("publisher", sa.String(length=64), nullable=False),
        sa.Column("period", sa.String(length=7), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("events", sa.BigInteger(), nullable=False),
        sa.Column("revenue_micros", sa.BigInteger(), nullable=False),
        sa.Column("publisher_share_micros", sa.BigInteger(), nullable=False),
        sa.Column("platform_take_micros", sa.BigInteger(), nullable=False),
        sa.Column("generated_at", _TIME, nullable=False),
        sa.Column("finalized_at", _TIME, nullable=True),
        sa.Column("finalized_by", sa.String(length=128), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_statements")),
        sa.UniqueConstraint("publisher", "period", name=op.f("uq_statements_publisher_period")),
    )
    op.create_index(op.f("ix_statements_period"), "statements", ["period"])
    op.create_table(
        "statement_lines",
        sa.Column("statement_id", sa.Integer(), nullable=False),
        sa.Column("line_no", sa.Integer(), nullable=False),
        sa.Column("model", sa.String(length=193), nullable=False),
        sa.Column("version", sa.String(length=64), nullable=False),
        sa.Column("unit", sa.String(length=16), nullable=False),
        sa.Column("revenue_share_bps", sa.Integer(), nullable=False),
        sa.Column("events", sa.BigInteger(), nullable=False),
        sa.Column("quantity", sa.BigInteger(), nullable=False),
        sa.Column("revenue_micros", sa.BigInteger(), nullable=False),
        sa.Column("publisher_share_micros", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["statement_id"],
            ["statements.id"],
            name=op.f("fk_statement_lines_statement_id_statements"),
        ),
        sa.PrimaryKeyConstraint("statement_id", "line_no", name=op.f("pk_statement_lines")),
    )
    dialect = op.get_bind().dialect.name
    if dialect == "postgresql":
        for function in _PG_FUNCTIONS.split("\n\n"):
            op.execute(function)
        for statement in _pg_triggers():
            op.execute(statement)
    elif dialect == "sqlite":
        for statement in _sqlite_triggers():
            op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for table, lines, _ in _DOCUMENTS:
            op.execute(f"DROP TRIGGER IF EXISTS {table}_finalized ON {table}")
            op.execute(f"DROP TRIGGER IF EXISTS {lines}_finalized ON {lines}")
        for table in _APPEND_ONLY:
            op.execute(f"DROP TRIGGER IF EXISTS {table}_append_only ON {table}")
        for function in ("billing_refuse", "billing_finalized_document"):
            op.execute(f"DROP FUNCTION IF EXISTS {function}()")
        for _, lines, _ in _DOCUMENTS:
            op.execute(f"DROP FUNCTION IF EXISTS {lines}_finalized()")
    op.drop_table("statement_lines")
    op.drop_index(op.f("ix_statements_period"), table_name="statements")
    op.drop_table("statements")
    op.drop_table("credit_note_lines")
    op.drop_index(op.f("ix_credit_notes_invoice_id"), table_name="credit_notes")
    op.drop_table("credit_notes")
    op.drop_table("invoice_lines")
    op.drop_index(op.f("ix_invoices_period"), table_name="invoices")
    op.drop_table("invoices")
    op.drop_index("ix_usage_events_recorded_at", table_name="usage_events")
