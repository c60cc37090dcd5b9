"""The registry service: models, immutable versions, lifecycle, aliases, lineage, catalog.

Contract other layers code against:

- ``get_model(owner, name) -> Model`` (NotFound code ``model_not_found``)
- ``get_version(owner, name, version) -> ModelVersion`` (NotFound code ``version_not_found``)
- ``resolve(owner, name, ref) -> ModelVersion``: ``ref`` is a version if the model has
  one by that name, else an alias name (aliases start with a letter and may not
  shadow a version, so this is unambiguous); NotFound ``version_not_found`` when it
  is neither. ``resolve(owner, name, None)`` uses the ``default`` alias; without
  one, the newest version in state deployed or approved; without one, the newest
  version that is not rejected or archived; else NotFound ``version_not_found``.
- ``list_versions(owner, name) -> list[ModelVersion]`` (oldest first)

Every method opens its own transaction(s); none is held while blobs are read or a
validation runs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from modelport.blobs import BlobStore
from modelport.blobs import repository as blob_repo
from modelport.changes import (
    AliasMoved,
    ChangeBus,
    LocalChangeBus,
    VersionPublished,
    VersionTransitioned,
)
from modelport.digests import sha256_digest
from modelport.errors import Conflict, InvalidInput, NotFound, Unprocessable
from modelport.logs import log_event
from modelport.manifest import UNSAFE_FORMATS, Manifest, canonical_bytes, manifest_digest
from modelport.manifest import parse_manifest as _parse_manifest
from modelport.registry import catalog, content, formats, lifecycle, signing
from modelport.registry import repository as repo
from modelport.registry.examples import check_examples
from modelport.registry.licenses import normalize_license
from modelport.registry.names import (
    ALIAS_RE,
    check_alias,
    check_model_name,
    check_owner,
    check_tags,
    check_task,
    check_version,
    split_model_ref,
)
from modelport.registry.processing import check_processing
from modelport.registry.search_index import SearchIndex, document_of, search_index_for
from modelport.registry.signing import Signer
from modelport.registry.trust import SIGNATURE_INVALID, TrustPolicy
from modelport.registry.types import (
    Alias,
    AliasEvent,
    CatalogPage,
    CatalogQuery,
    FormatDecision,
    LifecycleEvent,
    LifecycleState,
    Lineage,
    Model,
    ModelVersion,
    Signature,
    ValidationReport,
    Visibility,
)
from modelport.registry.validation import Validator
from modelport.sandbox.cancel import Cancellation
from modelport.store import Database
from modelport.store.base import utcnow
from modelport.store.blob_lenders import blob_lenders

log = logging.getLogger(__name__)

ParentFilter = Callable[[str, str, str], bool]
"""(owner, name, visibility) -> whether the publisher may read that model: name it as a
lineage parent, or list a blob that one of its versions holds."""

DEFAULT_ALIAS = "default"
MAX_DESCRIPTION = 10_000
MAX_SIGNER = 128


@dataclass(frozen=True)
class Published:
    """The outcome of a publish: the version, and whether this call created it."""

    version: ModelVersion
    created: bool


class RegistryService:
    def __init__(
        self,
        database: Database,
        blobs: BlobStore,
        *,
        signer: Signer,
        validator: Validator,
        changes: ChangeBus | None = None,
        trust: TrustPolicy | None = None,
        search: SearchIndex | None = None,
    ) -> None:
        self.database = database
        # The catalog's full-text index, written in the transaction of each model change.
        self.search_index = search or search_index_for(database.dialect)
        self.blobs = blobs
        self.signer = signer
        self.validator = validator
        # Which signatures make a version deployable and loadable (``verify_signed``).
        self.trust = trust or TrustPolicy()
        # Told after each commit of a new version, lifecycle event or alias move.
        self.changes: ChangeBus = changes or LocalChangeBus()

    # ---- models

    def create_model(
        self,
        owner: str,
        name: str,
        *,
        actor: str,
        task: str = "",
        description: str = "",
        tags: list[str] | tuple[str, ...] = (),
        license: str | None = None,
        visibility: str = Visibility.PRIVATE.value,
    ) -> Model:
        """Register a model (409 ``model_exists``). Its license is optional: each
        version's manifest declares its own; when given it must be valid SPDX."""
        check_owner(owner)
        check_model_name(name)
        check_task(task)
        clean_tags = check_tags(list(tags))
        if len(description) > MAX_DESCRIPTION:
            raise InvalidInput(
                f"description is longer than {MAX_DESCRIPTION} characters",
                code="invalid_description",
                field="description",
            )
        try:
            vis = Visibility(visibility)
        except ValueError:
            raise InvalidInput(
                f"visibility must be 'public' or 'private', not {visibility!r}",
                code="invalid_visibility",
                field="visibility",
            ) from None
        spdx = normalize_license(license) if license else ""
        try:
            with self.database.transaction() as session:
                model = repo.insert_model(
                    session,
                    owner=owner,
                    name=name,
                    task=task,
                    description=description,
                    license=spdx,
                    visibility=vis,
                    tags=clean_tags,
                    actor=actor,
                )
                self._reindex(session, repo.model_id(session, owner, name))
                return model
        except IntegrityError:
            raise Conflict(
                f"model {owner}/{name} already exists",
                code="model_exists",
                model=f"{owner}/{name}",
            ) from None

    def get_model(self, owner: str, name: str) -> Model:
        with self.database.transaction() as session:
            return repo.get_model(session, owner, name)

    def search(self, query: CatalogQuery) -> CatalogPage:
        with self.database.transaction() as session:
            return catalog.search(session, query, self.search_index)

    def _reindex(self, session: Session, mid: int) -> None:
        self.search_index.put(session, mid, document_of(session, mid))

    # ---- versions

    def get_version(self, owner: str, name: str, version: str) -> ModelVersion:
        with self.database.transaction() as session:
            return repo.version_by_id(session, repo.version_id(session, owner, name, version))

    def list_versions(self, owner: str, name: str) -> list[ModelVersion]:
        with self.database.transaction() as session:
            return repo.list_versions(session, owner, name)

    def borrowed_files(
        self, owner: str, digests: Iterable[str]
    ) -> dict[str, tuple[tuple[str, str, str], ...]]:
        """For each of ``digests`` that ``owner`` does not hold itself (mounted when it
        published), the models that lend it: (owner, name, visibility) of those with a
        version listing it whose owner holds it. A version of ``owner`` may use such a
        file only while ``owner`` may read one of them."""
        wanted = set(digests)
        with self.database.transaction() as session:
            unheld = wanted - blob_repo.held_by(session, owner, wanted)
            lenders = blob_lenders(session, unheld)
        return {digest: tuple(lenders.get(digest, ())) for digest in unheld}

    def resolve(self, owner: str, name: str, ref: str | None) -> ModelVersion:
        with self.database.transaction() as session:
            mid = repo.model_id(session, owner, name)
            if ref is None:
                vid = repo.alias_target(session, mid, DEFAULT_ALIAS) or _fallback(session, mid)
                if vid is None:
                    raise NotFound(
                        f"model {owner}/{name} has no version to serve",
                        code="version_not_found",
                        model=f"{owner}/{name}",
                    )
            else:
                vid = repo.find_version_id(session, mid, ref)
                if vid is None and ALIAS_RE.match(ref):
                    vid = repo.alias_target(session, mid, ref)
                if vid is None:
                    raise NotFound(
                        f"model {owner}/{name} has no version or alias {ref!r}",
                        code="version_not_found",
                        model=f"{owner}/{name}",
                        version=ref,
                    )
            return repo.version_by_id(session, vid)

    def publish(
        self,
        owner: str,
        name: str,
        version: str,
        manifest_data: Any,
        *,
        actor: str,
        can_see: ParentFilter | None = None,
    ) -> Published:
        """Publish ``owner/name:version`` from raw manifest JSON data.

        Idempotent by manifest digest: the same version with the same digest returns
        the existing one (``created=False``); with another digest it is refused
        (409 ``version_exists``). Concurrent identical publishes create one version.
        A lineage parent in a model ``can_see(owner, name, visibility)`` refuses is
        reported exactly like one that does not exist.

        Content addressing is no access grant: each file's blob must be held by ``owner``
        (its tenant uploaded the bytes), or be listed by a version that ``can_see`` lets
        the publisher read and whose own owner holds it (a cross-repository mount). A
        mount records nothing: reading the blob later still goes through a holder's
        version. Any other blob is refused exactly like one that is not stored
        (400 ``missing_blob``), so a digest learned elsewhere tells nothing. With
        ``can_see`` None (the admin, or a caller inside the platform) every stored blob
        may be listed and ``owner`` is recorded as holding the version's blobs.
        """
        check_owner(owner)
        check_model_name(name)
        check_version(version)
        manifest = parse_manifest(manifest_data)
        digest = manifest_digest(manifest)
        parents = _parent_refs(manifest)
        with self.database.transaction() as session:
            existing = _existing(session, owner, name, version, digest)
            if existing is None and can_see is not None:
                _check_blob_access(session, owner, manifest, can_see)
        if existing is not None:
            return Published(existing, created=False)
        self._check_blobs(manifest)
        self._check_contents(manifest)
        try:
            with self.database.transaction() as session:
                created = self._insert(
                    session, owner, name, version, manifest, digest, parents, actor, can_see
                )
        except IntegrityError:
            # Lost a race with an identical (or conflicting) publish: report what won.
            with self.database.transaction() as session:
                existing = _existing(session, owner, name, version, digest)
            if existing is None:
                raise
            return Published(existing, created=False)
        self.changes.publish(VersionPublished(owner, name, version))
        log_event(
            log,
            "version.published",
            model=f"{owner}/{name}",
            version=version,
            manifest_digest=digest,
            format=manifest.format,
            actor=actor,
        )
        return Published(created, created=True)

    def _insert(
        self,
        session: Session,
        owner: str,
        name: str,
        version: str,
        manifest: Manifest,
        digest: str,
        parents: list[tuple[str, str, str, str]],
        actor: str,
        can_see: ParentFilter | None = None,
    ) -> ModelVersion:
        # The model row lock, as alias changes take it: without it, an alias of this name
        # set meanwhile (its check blind to this uncommitted version) could land too.
        mid = repo.model_id(session, owner, name, lock=True)
        if repo.alias_target(session, mid, version) is not None:
            raise Conflict(
                f"{owner}/{name} has an alias named {version!r}; a version of that name "
                "would shadow it",
                code="version_conflicts_with_alias",
                version=version,
            )
        edges = []
        for p_owner, p_name, p_version, relation in parents:
            try:
                pid = repo.version_id(session, p_owner, p_name, p_version)
                parent_model = repo.get_model(session, p_owner, p_name)
                if can_see is not None and not can_see(
                    p_owner, p_name, parent_model.visibility.value
                ):
                    raise NotFound("hidden lineage parent")
            except NotFound:
                raise InvalidInput(
                    f"lineage parent {p_owner}/{p_name}:{p_version} does not exist",
                    code="unknown_parent",
                    field="manifest.lineage.parents",
                    parent=f"{p_owner}/{p_name}:{p_version}",
                ) from None
            edges.append((pid, relation))
        vid = repo.insert_version(
            session,
            model=mid,
            version=version,
            manifest=manifest,
            digest=digest,
            canonical=canonical_bytes(manifest).decode(),
            actor=actor,
        )
        repo.add_lineage_edges(session, vid, edges)
        self._reindex(session, mid)  # the card grows by this version's description and tags
        if can_see is None:  # trusted: the owner now holds what its version lists
            blob_repo.record_owner(session, (f.digest for f in manifest.files), owner, utcnow())
        repo.append_event(session, vid, None, lifecycle.INITIAL, actor=actor, reason="published")
        repo.add_signature(
            session,
            vid,
            public_key=self.signer.public_key,
            signature=self.signer.sign(digest),
            signer=self.signer.name,
        )
        return repo.version_by_id(session, vid)

    def _check_blobs(self, manifest: Manifest) -> None:
        for index, entry in enumerate(manifest.files):
            stored = self.blobs.size(entry.digest)
            if stored is None:
                raise missing_blob(index, entry.path, entry.digest)
            if stored != entry.size:
                raise InvalidInput(
                    f"file {entry.path!r}: blob {entry.digest} has {stored} bytes, the "
                    f"manifest declares {entry.size}",
                    code="blob_size_mismatch",
                    field=f"manifest.files.{index}.size",
                    path=entry.path,
                    digest=entry.digest,
                    stored_size=stored,
                )

    def _check_contents(self, manifest: Manifest) -> None:
        """Refuse code-bearing contents (pickles and the like), whatever the file's name
        or the manifest's format, before a version exists."""
        for index, entry in enumerate(manifest.files):
            found = content.find_unsafe(self.blobs, entry.digest, entry.size)
            if found is not None:
                raise unsafe_content(entry.path, found, field=f"manifest.files.{index}")

    # ---- lifecycle

    def events(self, owner: str, name: str, version: str) -> list[LifecycleEvent]:
        with self.database.transaction() as session:
            return repo.list_events(session, repo.version_id(session, owner, name, version))

    def transition(
        self, owner: str, name: str, version: str, to: str, *, actor: str, reason: str = ""
    ) -> LifecycleEvent:
        """Append a lifecycle event (409 ``illegal_transition``).

        ``to: validated`` runs a validation first (see ``validation``); the version
        row is locked while the current state is checked and the event appended, so
        two concurrent transitions from the same state cannot both succeed.
        ``to: approved`` needs a format the platform runs, or one an operator
        accepted (409 ``format_not_approvable``, see ``formats``).
        """
        target = lifecycle.parse_state(to)
        if target is LifecycleState.VALIDATED:
            return self.run_validation(owner, name, version, actor=actor, reason=reason)
        with self.database.transaction() as session:
            vid = repo.version_id(session, owner, name, version, lock=True)
            current = repo.current_state(session, vid)
            lifecycle.check_transition(current, target)
            if target is LifecycleState.APPROVED:
                formats.check_approvable(session, repo.version_by_id(session, vid).format)
            event = repo.append_event(session, vid, current, target, actor=actor, reason=reason)
        self._transitioned(owner, name, version, event)
        return event

    def _transitioned(self, owner: str, name: str, version: str, change: LifecycleEvent) -> None:
        self.changes.publish(VersionTransitioned(owner, name, version, change.to_state.value))
        log_event(
            log,
            "version.transitioned",
            model=f"{owner}/{name}",
            version=version,
            from_state=change.from_state.value if change.from_state else None,
            to_state=change.to_state.value,
            actor=change.actor,
        )

    # ---- formats

    def runnable_formats(self) -> frozenset[str]:
        return formats.runnable_formats()

    def format_decisions(self) -> list[FormatDecision]:
        with self.database.transaction() as session:
            return formats.decisions(session)

    def decide_format(self, fmt: str, *, reason: str, actor: str) -> FormatDecision:
        """Accept a format the platform does not run, so its versions may be approved
        (the operator's decision; the caller checks who may take it)."""
        clean = formats.check_decidable(fmt, reason)
        with self.database.transaction() as session:
            return formats.decide(session, fmt, reason=clean, actor=actor)

    def withdraw_format(self, fmt: str) -> None:
        """Withdraw a decision (404 ``format_decision_not_found``); what was approved
        under it stays approved."""
        with self.database.transaction() as session:
            formats.withdraw(session, fmt)

    def check_validatable(self, owner: str, name: str, version: str) -> None:
        """Refuse at once what a validation would refuse before running: 404
        ``version_not_found``, 409 ``illegal_transition`` (its state cannot move to
        ``validated``)."""
        with self.database.transaction() as session:
            vid = repo.version_id(session, owner, name, version)
            lifecycle.check_transition(repo.current_state(session, vid), LifecycleState.VALIDATED)

    def run_validation(
        self,
        owner: str,
        name: str,
        version: str,
        *,
        actor: str,
        reason: str = "",
        cancel: Cancellation | None = None,
    ) -> LifecycleEvent:
        """Validate the version here and now, store its report, and move it to
        ``validated`` when it passed (422 ``validation_failed`` with the report when it did
        not). Blocking, for as long as the validation runs: the API runs it as a job
        (``jobs.validation``), under the runners' cap. Once ``cancel`` is cancelled (before
        the report is stored) the sandboxed child is killed and ``Cancelled`` raised:
        no report, no transition, the version as it was."""
        with self.database.transaction() as session:
            vid = repo.version_id(session, owner, name, version)
            lifecycle.check_transition(repo.current_state(session, vid), LifecycleState.VALIDATED)
            record = repo.version_by_id(session, vid)
        report = self.validator.validate(record.manifest, cancel=cancel)
        if cancel is not None:
            cancel.settle()  # from here it is recorded whole: a later cancel is too late
        log_event(
            log,
            "version.validation",
            level=logging.INFO if report["passed"] else logging.WARNING,
            model=f"{owner}/{name}",
            version=version,
            passed=report["passed"],
            detail=report.get("detail", ""),
        )
        refused: Conflict | None = None
        event: LifecycleEvent | None = None
        # The report is stored whatever happens next, so errors are raised after commit.
        with self.database.transaction() as session:
            vid = repo.version_id(session, owner, name, version, lock=True)
            repo.add_report(session, vid, report)
            if report["passed"]:
                current = repo.current_state(session, vid)
                try:
                    lifecycle.check_transition(current, LifecycleState.VALIDATED)
                except Conflict as exc:  # another transition won while this one validated
                    refused = exc
                else:
                    event = repo.append_event(
                        session,
                        vid,
                        current,
                        LifecycleState.VALIDATED,
                        actor=actor,
                        reason=reason or "validation passed",
                    )
        if refused is not None:
            raise refused
        if event is None:
            raise Unprocessable(
                f"validation of {owner}/{name}:{version} failed: {report['detail']}",
                code="validation_failed",
                report=report,
            )
        self._transitioned(owner, name, version, event)
        return event

    def validation(self, owner: str, name: str, version: str) -> ValidationReport:
        """The latest validation report (404 ``validation_not_found`` before any)."""
        with self.database.transaction() as session:
            found = repo.latest_report(session, repo.version_id(session, owner, name, version))
        if found is None:
            raise NotFound(
                f"{owner}/{name}:{version} has not been validated yet",
                code="validation_not_found",
            )
        return found

    # ---- signatures

    def signatures(self, owner: str, name: str, version: str) -> list[Signature]:
        with self.database.transaction() as session:
            return repo.list_signatures(session, repo.version_id(session, owner, name, version))

    def verify_signed(
        self, owner: str, name: str, version: str, *, manifest: Manifest | None = None
    ) -> list[Signature]:
        """The signatures that let ``owner/name:version`` be deployed or loaded, checked
        now; 422 ``signature_invalid`` (the stored manifest or a signature was altered,
        or ``manifest``, the one about to be loaded, is not the signed one),
        ``signature_missing`` or ``signature_untrusted`` (``registry.trust``)."""
        ref = f"{owner}/{name}:{version}"
        with self.database.transaction() as session:
            vid = repo.version_id(session, owner, name, version)
            digest, text = repo.version_digest(session, vid)
            signatures = repo.list_signatures(session, vid)
        if manifest is not None and manifest_digest(manifest) != digest:
            raise Unprocessable(
                f"{ref}: the manifest being loaded is not the one its signatures cover ({digest})",
                code=SIGNATURE_INVALID,
                version=ref,
                manifest_digest=digest,
            )
        intact = sha256_digest(text.encode()) == digest
        self.trust.judge(ref, digest, intact, signatures)
        return signatures

    def add_signature(
        self,
        owner: str,
        name: str,
        version: str,
        *,
        public_key: bytes,
        signature: bytes,
        signer: str,
    ) -> Signature:
        """Attach an external Ed25519 signature of the manifest digest (400
        ``invalid_signature`` unless it verifies). Adding the same key's signature
        again returns the stored one."""
        if not 1 <= len(signer) <= MAX_SIGNER:
            raise InvalidInput(
                f"signer must be 1-{MAX_SIGNER} characters", code="invalid_signer", field="signer"
            )
        with self.database.transaction() as session:
            vid = repo.version_id(session, owner, name, version)
            digest, _ = repo.version_digest(session, vid)
            if not signing.verify(public_key, signature, digest):
                raise InvalidInput(
                    f"the signature does not verify against {digest} with the given public key",
                    code="invalid_signature",
                    manifest_digest=digest,
                )
            kid = signing.key_id(public_key)
            if not any(s.key_id == kid for s in repo.list_signatures(session, vid)):
                repo.add_signature(
                    session, vid, public_key=public_key, signature=signature, signer=signer
                )
            return next(s for s in repo.list_signatures(session, vid) if s.key_id == kid)

    # ---- aliases

    def aliases(self, owner: str, name: str) -> list[Alias]:
        with self.database.transaction() as session:
            return repo.list_aliases(session, repo.model_id(session, owner, name))

    def set_alias(self, owner: str, name: str, alias: str, version: str, *, actor: str) -> Alias:
        """Point ``alias`` at ``version`` atomically; the move is recorded in its history."""
        check_alias(alias)
        with self.database.transaction() as session:
            # The model row lock serializes every alias change of this model.
            mid = repo.model_id(session, owner, name, lock=True)
            if repo.find_version_id(session, mid, alias) is not None:
                raise Conflict(
                    f"{owner}/{name} has a version named {alias!r}; an alias of that name "
                    "would be shadowed by it",
                    code="alias_conflicts_with_version",
                    alias=alias,
                )
            vid = repo.find_version_id(session, mid, version)
            if vid is None:
                raise repo.version_not_found(owner, name, version)
            found = repo.set_alias(session, mid, alias, vid, actor=actor)
        self.changes.publish(AliasMoved(owner, name, alias, found.version))
        return found

    def delete_alias(self, owner: str, name: str, alias: str, *, actor: str) -> None:
        with self.database.transaction() as session:
            mid = repo.model_id(session, owner, name, lock=True)
            if not repo.delete_alias(session, mid, alias, actor=actor):
                raise alias_not_found(owner, name, alias)
        self.changes.publish(AliasMoved(owner, name, alias, None))

    def alias_history(self, owner: str, name: str, alias: str) -> list[AliasEvent]:
        with self.database.transaction() as session:
            history = repo.alias_history(session, repo.model_id(session, owner, name), alias)
        if not history:
            raise alias_not_found(owner, name, alias)
        return history

    # ---- lineage

    def lineage(self, owner: str, name: str, version: str) -> Lineage:
        with self.database.transaction() as session:
            vid = repo.version_id(session, owner, name, version)
            return Lineage(
                version=repo.version_by_id(session, vid),
                ancestors=tuple(repo.walk_lineage(session, vid, upward=True)),
                descendants=tuple(repo.walk_lineage(session, vid, upward=False)),
            )


def parse_manifest(data: Any) -> Manifest:
    """Schema validation plus the registry's own rules: safe format, SPDX license,
    examples that agree with themselves and the declared tensors (``check_examples``),
    processing entry points in the package (``check_processing``).
    Everything publishing checks that needs no blob store nor database."""
    manifest = _parse_manifest(data)
    if manifest.format in UNSAFE_FORMATS:
        raise InvalidInput(
            f"format '{manifest.format}' executes code when loaded and is refused",
            code="unsafe_format",
            field="manifest.format",
        )
    normalize_license(manifest.license, field="manifest.license")
    check_examples(manifest)
    check_processing(manifest)
    return manifest


def unsafe_content(path: str, found: content.Finding, *, field: str) -> InvalidInput:
    where = f"file {path!r}" + (f" (member {found.member!r})" if found.member else "")
    return InvalidInput(
        f"{where} holds {found.detail}: contents that run code when loaded are refused, "
        "whatever the format or the file's name",
        code="unsafe_content",
        field=field,
        path=path,
        member=found.member,
        found=found.kind,
    )


def alias_not_found(owner: str, name: str, alias: str) -> NotFound:
    return NotFound(
        f"{owner}/{name} has no alias {alias!r}",
        code="alias_not_found",
        model=f"{owner}/{name}",
        alias=alias,
    )


def missing_blob(index: int, path: str, digest: str) -> InvalidInput:
    """The one answer for a blob that is not stored and for one the publisher may not
    list: telling them apart would confirm that someone holds a digest's bytes."""
    return InvalidInput(
        f"file {path!r}: blob {digest} is not in the blob store, or not one this "
        "publisher uploaded or may read (upload it first)",
        code="missing_blob",
        field=f"manifest.files.{index}.digest",
        path=path,
        digest=digest,
    )


def _check_blob_access(
    session: Session, owner: str, manifest: Manifest, can_see: ParentFilter
) -> None:
    """Each file's blob is held by ``owner``, or listed by a version the publisher may
    read whose owner holds it; else ``missing_blob`` (see ``RegistryService.publish``)."""
    digests = {entry.digest for entry in manifest.files}
    held = blob_repo.held_by(session, owner, digests)
    lenders = blob_lenders(session, digests - held)
    for index, entry in enumerate(manifest.files):
        if entry.digest in held:
            continue
        if not any(can_see(o, n, v) for o, n, v in lenders.get(entry.digest, ())):
            raise missing_blob(index, entry.path, entry.digest)


def _existing(
    session: Session, owner: str, name: str, version: str, digest: str
) -> ModelVersion | None:
    """The stored version if it has this digest; None if absent; 409 if it differs."""
    mid = repo.model_id(session, owner, name)
    vid = repo.find_version_id(session, mid, version)
    if vid is None:
        return None
    stored, _ = repo.version_digest(session, vid)
    if stored != digest:
        raise Conflict(
            f"{owner}/{name}:{version} is already published with another manifest "
            f"({stored}); versions are immutable, publish a new version",
            code="version_exists",
            existing_digest=stored,
            manifest_digest=digest,
        )
    return repo.version_by_id(session, vid)


def _parent_refs(manifest: Manifest) -> list[tuple[str, str, str, str]]:
    """(owner, name, version, relation) of each lineage parent; malformed or repeated → 400."""
    refs: list[tuple[str, str, str, str]] = []
    for index, parent in enumerate(manifest.lineage.parents):
        field = f"manifest.lineage.parents.{index}"
        try:
            owner, name = split_model_ref(parent.model)
            check_version(parent.version)
        except InvalidInput:
            raise InvalidInput(
                f"lineage parent {parent.model}:{parent.version} is not a valid "
                "'owner/name' and version",
                code="unknown_parent",
                field=field,
                parent=f"{parent.model}:{parent.version}",
            ) from None
        if any((owner, name, parent.version) == r[:3] for r in refs):
            raise InvalidInput(
                f"lineage parent {parent.model}:{parent.version} is listed twice",
                code="invalid_manifest",
                field=field,
            )
        refs.append((owner, name, parent.version, parent.relation))
    return refs


def _fallback(session: Session, mid: int) -> int | None:
    """Newest deployed/approved version, else newest not rejected or archived."""
    newest_first = list(reversed(repo.version_states(session, mid)))
    for vid, _, state in newest_first:
        if state in lifecycle.SERVABLE_BY_DEFAULT:
            return vid
    for vid, _, state in newest_first:
        if state not in lifecycle.RETIRED:
            return vid
    return None
