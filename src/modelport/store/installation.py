"""This installation's id, made once by migration ``0012_installation``."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.exc import DBAPIError

from modelport.errors import Unavailable
from modelport.store.database import Database
from modelport.store.tables import InstallationRow


def installation_id(database: Database) -> str:
    """The id every process of this installation shares; ``Unavailable``
    (``installation_unknown``) when the database holds none, or more than one."""
    try:
        with database.transaction() as session:
            ids = session.scalars(select(InstallationRow.id).limit(2)).all()
    except DBAPIError as exc:  # no such table: not migrated yet
        raise Unavailable(
            "the database has no installation id; run `modelport migrate`",
            code="installation_unknown",
        ) from exc
    if len(ids) != 1:
        raise Unavailable(
            f"the database holds {len(ids) or 'no'} installation ids, not one; "
            "it must hold the one its migration made",
            code="installation_unknown",
        )
    return ids[0]
