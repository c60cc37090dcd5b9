"""Billing straight on the database, for the operator's commands that need no server
(``recompute``, ``reconcile``), as ``modelport migrate`` does: they read
``MODELPORT_DATABASE_URL`` (or the embedded SQLite under ``MODELPORT_HOME``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from modelport.cli.application import Application
from modelport.errors import ModelportError

if TYPE_CHECKING:
    from modelport.metering.billing.service import BillingService


@contextmanager
def billing_on_database(app: Application) -> Iterator[BillingService]:
    """The billing service on the configured database; errors end the command."""
    # Imported here so that every other command starts without the database stack.
    from sqlalchemy.exc import SQLAlchemyError

    from modelport.app import open_billing
    from modelport.config import Settings

    billing = open_billing(Settings())
    try:
        yield billing
    except ModelportError as exc:
        app.terminal.abort(f"{exc.message} ({exc.code})")
    except SQLAlchemyError as exc:
        app.terminal.abort(
            f"cannot read billing from the database ({type(exc).__name__}); "
            "is it migrated (modelport migrate)?"
        )
    finally:
        billing.database.dispose()
