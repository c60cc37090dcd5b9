"""Datasets: create one in a tenant's namespace, publish immutable versions, read and
list them as the caller may.

Access follows the models' rule (``tenancy.access``), on a dataset's own facts: its
tenant and the operator decide by roles; another tenant sees a public dataset, or a
private one a grant covers (a grant names a model *or* dataset by its name in the
namespace; a namespace grant covers both), and may only read it. A dataset the caller
may not see is the 404 ``dataset_not_found`` of a missing one. Publishing a version
needs ``model.register`` in the namespace; every split's file must be a blob the
dataset's tenant holds (uploaded through ``/api/uploads``, as model files are), of its
declared size, a Parquet file with exactly the declared columns and rows.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from sqlalchemy.exc import IntegrityError

from modelport.blobs.service import BlobService
from modelport.datasets import repository as repo
from modelport.datasets.splits import SplitRows
from modelport.datasets.types import (
    TASKS,
    Dataset,
    DatasetVersion,
    dataset_digest,
    parse_dataset_manifest,
)
from modelport.errors import Conflict, InvalidInput, ModelportError, NotFound
from modelport.registry.licenses import normalize_license
from modelport.registry.names import check_model_name, check_owner, check_version
from modelport.store import Database
from modelport.tenancy.access import decide_model, needs_grants
from modelport.tenancy.enforce import decided, enforce
from modelport.tenancy.policy import Namespace, Permission
from modelport.tenancy.types import GrantSet, Principal

VISIBILITIES = ("private", "public")


def dataset_not_found(owner: str, name: str) -> NotFound:
    return NotFound(
        f"dataset '{owner}/{name}' not found", code="dataset_not_found", dataset=f"{owner}/{name}"
    )


class DatasetService:
    def __init__(
        self,
        database: Database,
        blobs: BlobService,
        *,
        grants: Callable[[str], GrantSet],
        now: Callable[[], datetime],
    ) -> None:
        self.database = database
        self.blobs = blobs
        self.grants = grants
        """What other tenants shared with a tenant (``TenancyService.grants_to``)."""
        self.now = now

    # ---- access
    def _decide(self, principal: Principal, dataset: Dataset, permission: Permission) -> None:
        grants = (
            self.grants(principal.tenant)
            if principal.tenant is not None
            and needs_grants(principal, dataset.owner, dataset.visibility)
            else None
        )
        decision = decide_model(
            principal, permission, dataset.owner, dataset.name, dataset.visibility, grants
        )
        decided(decision, permission, hidden=lambda: dataset_not_found(dataset.owner, dataset.name))

    def require(
        self, principal: Principal, owner: str, name: str, permission: Permission
    ) -> Dataset:
        """The dataset if ``principal`` may do ``permission`` on it (404 where it may not
        see it, exactly as if it did not exist; 403 where it may see but not do this)."""
        with self.database.transaction() as session:
            dataset = repo.find(session, owner, name)
        if dataset is None:
            raise dataset_not_found(owner, name)
        self._decide(principal, dataset, permission)
        return dataset

    def exists(self, owner: str, name: str) -> bool:
        """Whether ``owner/name`` is a dataset (a grant may name it)."""
        with self.database.transaction() as session:
            return repo.find(session, owner, name) is not None

    def visible(self, principal: Principal, dataset: Dataset) -> bool:
        try:
            self._decide(principal, dataset, Permission.MODEL_READ)
        except ModelportError:  # hidden, or a key scoped away from reading
            return False
        return True

    # ---- datasets
    def create(
        self,
        principal: Principal,
        owner: str,
        name: str,
        *,
        visibility: str = "private",
        description: str = "",
    ) -> Dataset:
        """A new dataset in ``owner``'s namespace (409 ``dataset_exists``)."""
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
                if repo.find(session, owner, name) is not None:
                    raise _exists(owner, name)
                return repo.insert(
                    session,
                    owner,
                    name,
                    visibility=visibility,
                    description=description,
                    actor=principal.id,
                )
        except IntegrityError:
            raise _exists(owner, name) from None

    def listing(
        self, principal: Principal, *, owner: str | None = None, task: str | None = None
    ) -> list[tuple[Dataset, DatasetVersion | None]]:
        """The datasets the caller may see, each with its latest version."""
        with self.database.transaction() as session:
            found = repo.listing(session, owner)
        return [
            (d, v)
            for d, v in found
            if (task is None or (v is not None and v.task == task)) and self.visible(principal, d)
        ]

    # ---- versions
    def publish(
        self, principal: Principal, owner: str, name: str, version: str, manifest: object
    ) -> tuple[DatasetVersion, bool]:
        """Publish ``version`` (see the module docstring): (version, created). The same
        manifest again is a no-op; another one under a published version is 409
        ``dataset_version_exists``."""
        check_version(version)
        dataset = self.require(principal, owner, name, Permission.MODEL_REGISTER)
        parsed = parse_dataset_manifest(manifest)
        license = normalize_license(parsed.license)
        digest = dataset_digest(parsed)
        with self.database.transaction() as session:
            existing = repo.find_version(session, owner, name, version)
        if existing is not None:
            return self._same(existing, digest), False
        for split in parsed.splits:
            file = split.file
            if not self.blobs.held_by(dataset.owner, file.digest):
                raise InvalidInput(
                    f"split {split.name!r}: blob {file.digest} is not held by {owner}: upload it first",
                    code="missing_blob",
                    digest=file.digest,
                )
            if self.blobs.stat(file.digest).size != file.size:
                raise InvalidInput(
                    f"split {split.name!r}: blob {file.digest} is not {file.size} bytes",
                    code="blob_size_mismatch",
                    digest=file.digest,
                )
            SplitRows(self.blobs, parsed, split)  # the declared columns and rows, checked
        doc = parsed.model_dump(mode="json")
        try:
            with self.database.transaction() as session:
                repo.insert_version(
                    session,
                    owner,
                    name,
                    version,
                    digest=digest,
                    task=parsed.task,
                    license=license,
                    manifest=doc,
                    actor=principal.id,
                )
        except IntegrityError:  # a concurrent publish of the same version won
            with self.database.transaction() as session:
                found = repo.find_version(session, owner, name, version)
            if found is None:
                raise
            return self._same(found, digest), False
        return self.version(principal, owner, name, version), True

    @staticmethod
    def _same(existing: DatasetVersion, digest: str) -> DatasetVersion:
        if existing.digest != digest:
            raise Conflict(
                f"dataset version {existing.ref} is published with another manifest",
                code="dataset_version_exists",
                digest=existing.digest,
            )
        return existing

    def version(self, principal: Principal, owner: str, name: str, version: str) -> DatasetVersion:
        """A version the caller may read (404 ``dataset_version_not_found``)."""
        self.require(principal, owner, name, Permission.MODEL_READ)
        with self.database.transaction() as session:
            found = repo.find_version(session, owner, name, version)
        if found is None:
            raise NotFound(
                f"dataset '{owner}/{name}' has no version {version!r}",
                code="dataset_version_not_found",
            )
        return found

    def versions(self, principal: Principal, owner: str, name: str) -> list[DatasetVersion]:
        self.require(principal, owner, name, Permission.MODEL_READ)
        with self.database.transaction() as session:
            return repo.versions(session, owner, name)


def _exists(owner: str, name: str) -> Conflict:
    return Conflict(f"dataset '{owner}/{name}' exists", code="dataset_exists")


__all__ = ["TASKS", "VISIBILITIES", "DatasetService", "dataset_not_found"]
