"""One kind of asset as a service: create one in a tenant's namespace, publish immutable
versions, read and list them as the caller may (``access``).

A kind subclasses ``AssetCatalog`` with its records, its manifest and its hooks: how a
manifest is parsed and digested, the version columns it stores, and what it checks
before a version is written. Publishing needs ``model.register`` in the namespace; the
same manifest again under a version is a no-op, another one is 409
``<kind>_version_exists``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

from pydantic import BaseModel
from sqlalchemy.exc import IntegrityError

from modelport.assets.access import AssetAccess
from modelport.assets.manifests import manifest_digest, require_same
from modelport.assets.queries import AssetQueries
from modelport.assets.records import Asset
from modelport.assets.search import AssetEntry
from modelport.errors import Conflict, InvalidInput, NotFound
from modelport.registry.licenses import normalize_license
from modelport.registry.names import check_model_name, check_owner, check_version
from modelport.store import Database
from modelport.tenancy.enforce import enforce
from modelport.tenancy.policy import Namespace, Permission
from modelport.tenancy.types import GrantSet, Principal

VISIBILITIES = ("private", "public")


class AssetVersion(Protocol):
    @property
    def version(self) -> str: ...
    @property
    def digest(self) -> str: ...
    @property
    def license(self) -> str: ...
    @property
    def ref(self) -> str: ...


A = TypeVar("A", bound=Asset)
V = TypeVar("V", bound=AssetVersion)
M = TypeVar("M", bound=BaseModel)


class AssetCatalog(Generic[A, V, M]):
    kind = "asset"
    """The word in messages and codes (``dataset``, ``template``)."""

    def __init__(
        self, database: Database, queries: AssetQueries[A, V], grants: Callable[[str], GrantSet]
    ) -> None:
        self.database = database
        self.queries = queries
        self.access = AssetAccess(grants)

    # ---- the kind's hooks
    def parse(self, manifest: object) -> M:
        """The manifest, strictly parsed (400 ``invalid_<kind>_manifest``)."""
        raise NotImplementedError

    def license_of(self, parsed: M) -> str:
        """The manifest's license, as written."""
        raise NotImplementedError

    def columns(self, parsed: M) -> dict[str, Any]:
        """The version row's columns of the kind's own, beside digest, license, manifest."""
        return {}

    def check(self, asset: A, parsed: M) -> None:
        """What must hold before a version of ``asset`` is written (its files, say)."""

    def task_of(self, version: V) -> str | None:
        """The version's task, where the kind has one."""
        return None

    def card_of(self, version: V) -> str:
        """What the version's manifest says of it, searched in the catalog."""
        return ""

    def not_found(self, owner: str, name: str) -> NotFound:
        return NotFound(
            f"{self.kind} '{owner}/{name}' not found",
            code=f"{self.kind}_not_found",
            **{self.kind: f"{owner}/{name}"},
        )

    # ---- access
    def _decide(self, principal: Principal, asset: A, permission: Permission) -> None:
        self.access.decide(
            principal,
            permission,
            owner=asset.owner,
            name=asset.name,
            visibility=asset.visibility,
            hidden=lambda: self.not_found(asset.owner, asset.name),
        )

    def require(self, principal: Principal, owner: str, name: str, permission: Permission) -> A:
        """The asset if ``principal`` may do ``permission`` on it (404 where it may not
        see it, exactly as if it did not exist; 403 where it may see but not do this)."""
        with self.database.transaction() as session:
            asset = self.queries.find(session, owner, name)
        if asset is None:
            raise self.not_found(owner, name)
        self._decide(principal, asset, permission)
        return asset

    def exists(self, owner: str, name: str) -> bool:
        """Whether ``owner/name`` is an asset of this kind (a grant may name it)."""
        with self.database.transaction() as session:
            return self.queries.find(session, owner, name) is not None

    def visible(self, principal: Principal, asset: A) -> bool:
        return self.access.sees(
            principal, owner=asset.owner, name=asset.name, visibility=asset.visibility
        )

    # ---- assets
    def create(
        self,
        principal: Principal,
        owner: str,
        name: str,
        *,
        visibility: str = "private",
        description: str = "",
    ) -> A:
        """A new asset in ``owner``'s namespace (409 ``<kind>_exists``)."""
        check_owner(owner)
        check_model_name(name)
        if visibility not in VISIBILITIES:
            raise InvalidInput(
                f"visibility must be one of {', '.join(VISIBILITIES)}",
                code="invalid_visibility",
                field="visibility",
            )
        enforce(
            principal,
            Permission.MODEL_REGISTER,
            Namespace(owner),
            hidden=lambda: NotFound("not found"),
        )
        try:
            with self.database.transaction() as session:
                if self.queries.find(session, owner, name) is not None:
                    raise self._exists(owner, name)
                return self.queries.insert(
                    session,
                    owner,
                    name,
                    visibility=visibility,
                    description=description,
                    actor=principal.id,
                )
        except IntegrityError:
            raise self._exists(owner, name) from None

    def _exists(self, owner: str, name: str) -> Conflict:
        return Conflict(f"{self.kind} '{owner}/{name}' exists", code=f"{self.kind}_exists")

    def visible_listing(
        self, principal: Principal, owner: str | None = None
    ) -> list[tuple[A, V | None]]:
        """The assets the caller may see, each with its latest version."""
        with self.database.transaction() as session:
            found = self.queries.listing(session, owner)
        return [(a, v) for a, v in found if self.visible(principal, a)]

    def entries(self, principal: Principal) -> list[AssetEntry]:
        """The assets the caller may see as the catalog lists them (``assets.search``)."""
        return [
            AssetEntry(
                kind=self.kind,
                owner=a.owner,
                name=a.name,
                visibility=a.visibility,
                description=a.description,
                version=None if v is None else v.version,
                task=None if v is None else self.task_of(v),
                license=None if v is None else v.license,
                card="" if v is None else self.card_of(v),
            )
            for a, v in self.visible_listing(principal)
        ]

    # ---- versions
    def publish(
        self, principal: Principal, owner: str, name: str, version: str, manifest: object
    ) -> tuple[V, bool]:
        """Publish ``version``: (version, created); see the module docstring."""
        check_version(version)
        asset = self.require(principal, owner, name, Permission.MODEL_REGISTER)
        parsed = self.parse(manifest)
        license = normalize_license(self.license_of(parsed))
        digest = manifest_digest(parsed)
        with self.database.transaction() as session:
            existing = self.queries.find_version(session, owner, name, version)
        if existing is not None:
            return self._same(existing, digest), False
        self.check(asset, parsed)
        columns = {
            "digest": digest,
            "license": license,
            "manifest": parsed.model_dump(mode="json"),
            **self.columns(parsed),
        }
        try:
            with self.database.transaction() as session:
                self.queries.insert_version(
                    session, owner, name, version, created_by=principal.id, **columns
                )
        except IntegrityError:  # a concurrent publish of the same version won
            with self.database.transaction() as session:
                found = self.queries.find_version(session, owner, name, version)
            if found is None:
                raise
            return self._same(found, digest), False
        return self.version(principal, owner, name, version), True

    def _same(self, existing: V, digest: str) -> V:
        require_same(
            existing.digest,
            digest,
            ref=existing.ref,
            what=self.kind,
            code=f"{self.kind}_version_exists",
        )
        return existing

    def version(self, principal: Principal, owner: str, name: str, version: str) -> V:
        """A version the caller may read (404 ``<kind>_version_not_found``)."""
        self.require(principal, owner, name, Permission.MODEL_READ)
        with self.database.transaction() as session:
            found = self.queries.find_version(session, owner, name, version)
        if found is None:
            raise NotFound(
                f"{self.kind} '{owner}/{name}' has no version {version!r}",
                code=f"{self.kind}_version_not_found",
            )
        return found

    def versions(self, principal: Principal, owner: str, name: str) -> list[V]:
        self.require(principal, owner, name, Permission.MODEL_READ)
        with self.database.transaction() as session:
            return self.queries.versions(session, owner, name)
