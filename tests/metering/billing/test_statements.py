"""Publisher statements: revenue per model version from the ledger, the publisher's
share and the platform's take adding up to the revenue to the micro-unit."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from modelport.errors import Conflict
from modelport.metering.billing.service import BillingService
from modelport.metering.billing.types import DocumentStatus
from modelport.metering.ledger import Ledger
from modelport.metering.types import Unit, UsageStatus
from modelport.store import Database
from tests.metering.billing.conftest import Clock
from tests.metering.billing.factories import DECEMBER, event, price


def test_a_statement_per_publisher_with_share_and_take(
    billing: BillingService, ledger: Ledger
) -> None:
    odd = price(333, rule_id=1, share_bps=5_000)  # 166.5 to the publisher: rounded down
    ledger.record(
        [
            *(event("globex", "acme/sentiment", "1", snapshot=odd) for _ in range(3)),
            event("initech", "acme/sentiment", "2", snapshot=price(1_000, rule_id=2)),
            event("initech", "acme/free", "1", snapshot=price(0, rule_id=None)),
            event("acme", "globex/tokens", "1", unit=Unit.OUTPUT_TOKEN, quantity=10),
        ]
    )
    statements = {s.publisher: s for s in billing.generate("2026-11").statements}
    assert sorted(statements) == ["acme", "globex"]
    acme = statements["acme"]
    assert acme.status is DocumentStatus.DRAFT and acme.content.events == 5
    lines = {(x.model, x.version): x for x in acme.content.lines}
    v1 = lines["acme/sentiment", "1"]
    assert (v1.events, v1.revenue_micros, v1.publisher_share_micros) == (3, 999, 498)
    assert v1.platform_take_micros == 501
    assert lines["acme/sentiment", "2"].publisher_share_micros == 700
    assert lines["acme/free", "1"].events == 1 and lines["acme/free", "1"].revenue_micros == 0
    assert acme.revenue_micros == 1_999
    assert acme.publisher_share_micros == 1_198 and acme.platform_take_micros == 801
    assert acme.publisher_share_micros + acme.platform_take_micros == acme.revenue_micros
    # The statement's revenue is what the callers' invoices charged for acme's models.
    invoices = billing.list_invoices(period="2026-11")
    charged = sum(
        x.amount_micros for i in invoices for x in i.content.lines if x.model.startswith("acme/")
    )
    assert charged == acme.revenue_micros
    assert billing.get_statement(acme.id) == acme
    assert billing.list_statements(publisher="globex") == [statements["globex"]]


def test_failed_calls_earn_what_their_callers_were_charged(
    billing: BillingService, ledger: Ledger
) -> None:
    ledger.record(
        [
            event("globex", status=UsageStatus.FAILED, snapshot=price(1_000)),  # charged 0
            event("globex", status=UsageStatus.SUCCEEDED, snapshot=price(1_000)),
        ]
    )
    [statement] = billing.generate("2026-11").statements
    assert statement.content.events == 2 and statement.revenue_micros == 1_000


def test_finalised_statements_are_kept_and_immutable(
    billing: BillingService, ledger: Ledger, clock: Clock, database: Database
) -> None:
    ledger.record([event("globex", "acme/sentiment")])
    [statement] = billing.generate("2026-11").statements
    with pytest.raises(Conflict) as caught:
        billing.finalize_statement(statement.id, actor="admin")
    assert caught.value.code == "period_open"
    clock.at = DECEMBER
    final = billing.finalize_statement(statement.id, actor="admin")
    assert final.status is DocumentStatus.FINALIZED and final.finalized_by == "admin"
    with pytest.raises(Conflict) as caught:
        billing.finalize_statement(statement.id, actor="admin")
    assert caught.value.code == "statement_finalized"
    assert "statement:acme" in billing.generate("2026-11").kept
    with pytest.raises(DBAPIError, match="immutable"), database.transaction() as session:
        session.execute(
            text(f"UPDATE statement_lines SET revenue_micros = 0 WHERE statement_id = {final.id}")
        )
    assert billing.get_statement(final.id) == final
