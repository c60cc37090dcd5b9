"""Every column that holds a sealed secret, and their rotation to the newest key.

A feature that stores a secret adds its column here (``SEALED_COLUMNS``); rotation
(``modelport secrets rotate``) then covers it.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import InstrumentedAttribute

from modelport.store.database import Database
from modelport.store.secrets import SecretBox, is_sealed
from modelport.store.tables import ConsoleSessionRow, RemoteBackendRow, WebhookSecretRow

SEALED_COLUMNS: tuple[InstrumentedAttribute[str | None], ...] = (
    RemoteBackendRow.api_key,
    WebhookSecretRow.value,
    ConsoleSessionRow.credential,
)
"""Columns of sealed secrets (text; NULL: none stored)."""


@dataclass(frozen=True)
class Rotation:
    """What a rotation did, by column (``table.column``)."""

    resealed: dict[str, int]
    """Values sealed by an older key, now sealed by the newest."""
    legacy: dict[str, int]
    """Plain values (stored before secrets were sealed), now sealed."""
    current: dict[str, int]
    """Values already sealed by the newest key, left as they were."""


def rotate(database: Database, box: SecretBox) -> Rotation:
    """Seal every stored secret with the newest key of ``box`` (one transaction per
    column, its rows locked). A value no key opens stops the rotation of its column
    (``secret_unreadable``) and leaves that column as it was."""
    resealed: dict[str, int] = {}
    legacy: dict[str, int] = {}
    current: dict[str, int] = {}
    for column in SEALED_COLUMNS:
        table = column.class_
        label = f"{table.__tablename__}.{column.key}"
        resealed[label] = legacy[label] = current[label] = 0
        with database.transaction() as session:
            rows = session.scalars(select(table).where(column.is_not(None)).with_for_update()).all()
            for row in rows:
                stored: str = getattr(row, column.key)
                if box.sealed_by_newest(stored):
                    current[label] += 1
                    continue
                (resealed if is_sealed(stored) else legacy)[label] += 1
                setattr(row, column.key, box.reseal(stored))
    return Rotation(resealed=resealed, legacy=legacy, current=current)
