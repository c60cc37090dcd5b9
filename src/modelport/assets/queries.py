"""An asset's rows and its versions' rows: the caller's session in, frozen records out.

One ``AssetQueries`` per kind of asset, over its two tables: the asset (``owner``,
``name``, ``visibility``, ``description``, ``created_by``; unique owner and name) and its
versions (a foreign key to the asset named by ``link``, ``version``, and the kind's own
columns).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

from sqlalchemy import select
from sqlalchemy.orm import Session

A = TypeVar("A")
V = TypeVar("V")


class AssetQueries(Generic[A, V]):
    def __init__(
        self,
        asset_row: Any,
        version_row: Any,
        *,
        link: str,
        asset_of: Callable[[Any], A],
        version_of: Callable[[Any, Any], V],
    ) -> None:
        self._asset = asset_row
        self._version = version_row
        self._link = link
        self._asset_of = asset_of
        """A record from an asset row."""
        self._version_of = version_of
        """A record from an asset row and one of its version rows."""

    def _row(self, session: Session, owner: str, name: str) -> Any:
        table = self._asset
        return session.scalar(select(table).where(table.owner == owner, table.name == name))

    def _joined(self) -> Any:
        link = getattr(self._version, self._link)
        return select(self._asset, self._version).join(self._version, link == self._asset.id)

    def find(self, session: Session, owner: str, name: str) -> A | None:
        row = self._row(session, owner, name)
        return None if row is None else self._asset_of(row)

    def insert(
        self,
        session: Session,
        owner: str,
        name: str,
        *,
        visibility: str,
        description: str,
        actor: str,
    ) -> A:
        row = self._asset(
            owner=owner, name=name, visibility=visibility, description=description, created_by=actor
        )
        session.add(row)
        session.flush()
        return self._asset_of(row)

    def find_version(self, session: Session, owner: str, name: str, version: str) -> V | None:
        found = session.execute(
            self._joined().where(
                self._asset.owner == owner,
                self._asset.name == name,
                self._version.version == version,
            )
        ).first()
        return None if found is None else self._version_of(found[0], found[1])

    def insert_version(
        self, session: Session, owner: str, name: str, version: str, **columns: Any
    ) -> None:
        """A version of ``owner/name`` with the kind's ``columns`` (``created_by`` among
        them)."""
        asset = self._row(session, owner, name)
        assert asset is not None
        session.add(self._version(**{self._link: asset.id}, version=version, **columns))
        session.flush()

    def versions(self, session: Session, owner: str, name: str) -> list[V]:
        rows = session.execute(
            self._joined()
            .where(self._asset.owner == owner, self._asset.name == name)
            .order_by(self._version.id)
        ).all()
        return [self._version_of(a, v) for a, v in rows]

    def listing(self, session: Session, owner: str | None = None) -> list[tuple[A, V | None]]:
        """Every asset (of ``owner``) with its latest version, by owner and name."""
        query = select(self._asset).order_by(self._asset.owner, self._asset.name)
        if owner is not None:
            query = query.where(self._asset.owner == owner)
        rows = list(session.scalars(query))
        latest: dict[int, Any] = {}
        if rows:
            link = getattr(self._version, self._link)
            for version in session.scalars(
                select(self._version)
                .where(link.in_([r.id for r in rows]))
                .order_by(self._version.id)
            ):
                latest[getattr(version, self._link)] = version
        return [
            (self._asset_of(r), self._version_of(r, latest[r.id]) if r.id in latest else None)
            for r in rows
        ]
