"""Prompt templates: create one in a tenant's namespace, publish immutable versions,
read, list and render them as the caller may.

Access is the models' and datasets' rule (``tenancy.access``) on a template's own facts:
its tenant and the operator decide by roles; another tenant sees a public template, or a
private one a grant covers, and may read and render it. A template the caller may not
see is the 404 ``template_not_found`` of a missing one. Publishing needs
``model.register`` in the namespace. A template holds no blobs: its manifest is the
whole asset, and its digest the version's identity.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from sqlalchemy.exc import IntegrityError

from modelport.errors import Conflict, InvalidInput, ModelportError, NotFound
from modelport.registry.licenses import normalize_license
from modelport.registry.names import check_model_name, check_owner, check_version
from modelport.store import Database
from modelport.templates import repository as repo
from modelport.templates.render import render
from modelport.templates.types import (
    Template,
    TemplateVersion,
    parse_template_manifest,
    template_digest,
)
from modelport.tenancy.access import decide_model, needs_grants
from modelport.tenancy.enforce import decided, enforce
from modelport.tenancy.policy import Namespace, Permission
from modelport.tenancy.types import GrantSet, Principal

VISIBILITIES = ("private", "public")


def template_not_found(owner: str, name: str) -> NotFound:
    return NotFound(
        f"template '{owner}/{name}' not found",
        code="template_not_found",
        template=f"{owner}/{name}",
    )


def split_ref(ref: str) -> tuple[str, str, str]:
    """``owner/name:version`` as its parts; 400 ``invalid_template_ref`` otherwise."""
    model, _, version = ref.partition(":")
    owner, _, name = model.partition("/")
    if not (owner and name and version):
        raise InvalidInput(
            f"a template is named owner/name:version, not {ref[:200]!r}",
            code="invalid_template_ref",
            field="template.ref",
        )
    return owner, name, version


class TemplateService:
    def __init__(self, database: Database, *, grants: Callable[[str], GrantSet]) -> None:
        self.database = database
        self.grants = grants
        """What other tenants shared with a tenant (``TenancyService.grants_to``)."""

    # ---- access
    def _decide(self, principal: Principal, template: Template, permission: Permission) -> None:
        grants = (
            self.grants(principal.tenant)
            if principal.tenant is not None
            and needs_grants(principal, template.owner, template.visibility)
            else None
        )
        decision = decide_model(
            principal, permission, template.owner, template.name, template.visibility, grants
        )
        decided(
            decision, permission, hidden=lambda: template_not_found(template.owner, template.name)
        )

    def require(
        self, principal: Principal, owner: str, name: str, permission: Permission
    ) -> Template:
        """The template if ``principal`` may do ``permission`` on it (404 where it may
        not see it, as if it did not exist; 403 where it may see but not do this)."""
        with self.database.transaction() as session:
            template = repo.find(session, owner, name)
        if template is None:
            raise template_not_found(owner, name)
        self._decide(principal, template, permission)
        return template

    def exists(self, owner: str, name: str) -> bool:
        """Whether ``owner/name`` is a template (a grant may name it)."""
        with self.database.transaction() as session:
            return repo.find(session, owner, name) is not None

    def visible(self, principal: Principal, template: Template) -> bool:
        try:
            self._decide(principal, template, Permission.MODEL_READ)
        except ModelportError:
            return False
        return True

    # ---- templates
    def create(
        self,
        principal: Principal,
        owner: str,
        name: str,
        *,
        visibility: str = "private",
        description: str = "",
    ) -> Template:
        """A new template in ``owner``'s namespace (409 ``template_exists``)."""
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
        self, principal: Principal, *, owner: str | None = None
    ) -> list[tuple[Template, TemplateVersion | None]]:
        """The templates the caller may see, each with its latest version."""
        with self.database.transaction() as session:
            found = repo.listing(session, owner)
        return [(t, v) for t, v in found if self.visible(principal, t)]

    # ---- versions
    def publish(
        self, principal: Principal, owner: str, name: str, version: str, manifest: object
    ) -> tuple[TemplateVersion, bool]:
        """Publish ``version``: (version, created). The same manifest again is a no-op;
        another one under a published version is 409 ``template_version_exists``."""
        check_version(version)
        self.require(principal, owner, name, Permission.MODEL_REGISTER)
        parsed = parse_template_manifest(manifest)
        license = normalize_license(parsed.license)
        digest = template_digest(parsed)
        with self.database.transaction() as session:
            existing = repo.find_version(session, owner, name, version)
        if existing is not None:
            return self._same(existing, digest), False
        try:
            with self.database.transaction() as session:
                repo.insert_version(
                    session,
                    owner,
                    name,
                    version,
                    digest=digest,
                    license=license,
                    manifest=parsed.model_dump(mode="json"),
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
    def _same(existing: TemplateVersion, digest: str) -> TemplateVersion:
        if existing.digest != digest:
            raise Conflict(
                f"template version {existing.ref} is published with another manifest",
                code="template_version_exists",
                digest=existing.digest,
            )
        return existing

    def version(self, principal: Principal, owner: str, name: str, version: str) -> TemplateVersion:
        """A version the caller may read (404 ``template_version_not_found``)."""
        self.require(principal, owner, name, Permission.MODEL_READ)
        with self.database.transaction() as session:
            found = repo.find_version(session, owner, name, version)
        if found is None:
            raise NotFound(
                f"template '{owner}/{name}' has no version {version!r}",
                code="template_version_not_found",
            )
        return found

    def versions(self, principal: Principal, owner: str, name: str) -> list[TemplateVersion]:
        self.require(principal, owner, name, Permission.MODEL_READ)
        with self.database.transaction() as session:
            return repo.versions(session, owner, name)

    def render(
        self, principal: Principal, ref: str, values: Mapping[str, Any]
    ) -> tuple[TemplateVersion, list[dict[str, str]]]:
        """The version ``ref`` (``owner/name:version``) the caller may read, and its
        messages with ``values`` in (``render.render``'s refusals)."""
        owner, name, version = split_ref(ref)
        found = self.version(principal, owner, name, version)
        return found, render(found.manifest, values)


def _exists(owner: str, name: str) -> Conflict:
    return Conflict(f"template '{owner}/{name}' exists", code="template_exists")


__all__ = ["VISIBILITIES", "TemplateService", "split_ref", "template_not_found"]
