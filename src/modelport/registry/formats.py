"""Which formats' versions may be approved: those the platform runs, and those an
operator has explicitly accepted.

Formats are an allow-list. The runtime's own format plugins (``modelport.runtime.formats``,
today ``onnx``) are what the platform loads and runs itself, after validation ran the
version's examples. A version of any other format is a package of files the platform
only stores and checks: consumers who pull it load it with their own tools. It can be
published and validated (its files and contents are checked), but it reaches
``approved`` only once a platform admin has accepted its format with a reason (a
``format_decisions`` row; the API writes both the decision and its withdrawal to the
audit log). Withdrawing a decision stops further approvals; versions approved
meanwhile stay approved.
"""

from __future__ import annotations

import re

from sqlalchemy import select
from sqlalchemy.orm import Session

from modelport.errors import Conflict, InvalidInput, NotFound
from modelport.manifest import UNSAFE_FORMATS
from modelport.registry.types import FormatDecision
from modelport.store.base import utcnow
from modelport.store.tables import FormatDecisionRow

MAX_REASON = 2000
_FORMAT_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,31}$")


def runnable_formats() -> frozenset[str]:
    """The formats the platform's runtime loads and runs."""
    # Imported late: keeps the runtime out of the registry's import time.
    from modelport.runtime.formats.registry import known_formats

    return known_formats()


def check_decidable(fmt: str, reason: str) -> str:
    """The reason, stripped; 400 for a malformed, unsafe or runnable format, or no reason."""
    if not _FORMAT_RE.match(fmt):
        raise InvalidInput(
            f"format must be a lowercase identifier such as 'gguf', not {fmt!r}",
            code="invalid_format",
            field="format",
        )
    if fmt in UNSAFE_FORMATS:
        raise InvalidInput(
            f"format '{fmt}' executes code when loaded and cannot be accepted",
            code="unsafe_format",
            field="format",
        )
    if fmt in runnable_formats():
        raise InvalidInput(
            f"format '{fmt}' is run by the platform; its versions need no decision",
            code="format_runnable",
            field="format",
        )
    reason = reason.strip()
    if not reason or len(reason) > MAX_REASON:
        raise InvalidInput(
            f"a decision needs a reason of 1-{MAX_REASON} characters",
            code="reason_required",
            field="reason",
        )
    return reason


def _record(row: FormatDecisionRow) -> FormatDecision:
    return FormatDecision(
        format=row.format, reason=row.reason, decided_by=row.decided_by, decided_at=row.decided_at
    )


def decide(session: Session, fmt: str, *, reason: str, actor: str) -> FormatDecision:
    """Accept ``fmt`` (or record a new reason for an accepted one)."""
    row = session.get(FormatDecisionRow, fmt, with_for_update=True)
    if row is None:
        row = FormatDecisionRow(format=fmt)
        session.add(row)
    row.reason = reason
    row.decided_by = actor
    row.decided_at = utcnow()
    session.flush()
    return _record(row)


def withdraw(session: Session, fmt: str) -> None:
    row = session.get(FormatDecisionRow, fmt, with_for_update=True)
    if row is None:
        raise decision_not_found(fmt)
    session.delete(row)


def decisions(session: Session) -> list[FormatDecision]:
    rows = session.scalars(select(FormatDecisionRow).order_by(FormatDecisionRow.format))
    return [_record(row) for row in rows]


def check_approvable(session: Session, fmt: str) -> None:
    """409 ``format_not_approvable`` unless ``fmt`` is runnable or was accepted."""
    if fmt in runnable_formats() or session.get(FormatDecisionRow, fmt) is not None:
        return
    runs = ", ".join(sorted(runnable_formats()))
    raise Conflict(
        f"format '{fmt}' is not run by this platform (it runs: {runs}); its versions can "
        f"be approved once a platform admin accepts the format, with a reason "
        f"(PUT /api/formats/{fmt})",
        code="format_not_approvable",
        format=fmt,
    )


def decision_not_found(fmt: str) -> NotFound:
    return NotFound(
        f"no operator decision accepts format {fmt!r}",
        code="format_decision_not_found",
        format=fmt,
    )
