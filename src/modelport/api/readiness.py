"""The one readiness probe of a serving process: its database answers.

Answered on two paths, each in its protocol's shape: ``/readyz`` (``routes.health``)
and the Open Inference Protocol's ``/v2/health/ready`` (``v2.routes``). A worker
process has no database and is ready once it is up (``api.worker``).
"""

from __future__ import annotations

import logging

from sqlalchemy import text

from modelport.store import Database

_log = logging.getLogger(__name__)


def database_answers(database: Database) -> bool:
    """Whether the database answers a trivial query. Blocking: call from a worker
    thread. A failure is logged, never answered: the probes are open to anyone, and a
    driver's message names hosts, users and databases."""
    try:
        with database.transaction() as session:
            session.execute(text("SELECT 1"))
    except Exception:  # any driver error means not ready
        _log.warning("readiness: the database does not answer", exc_info=True)
        return False
    return True
