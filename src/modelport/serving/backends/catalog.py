"""Declared remote backends: stored in the database, built into backend objects, and
registered on the health board so the prober and circuit breakers cover them.

A backend belongs to a tenant and only that tenant's deployments may name it. The
catalog keeps the built objects in memory; it reads the table at start (``load``) and
changes through it take effect at once in this process. (Another process sees a
backend declared elsewhere after its next start.)

A backend's URL must pass the outgoing-connection policy (``modelport.netpolicy``:
public addresses only, unless the operator allow-lists the host): a URL it refuses is
400 ``backend_url_not_allowed`` and nothing is stored nor contacted. Every connection
the built backend makes is checked again (``guard``).

A backend's API key is stored sealed (``store.secrets.SecretBox``) and opened only to
build the backend object; it is never returned nor logged. A legacy plain key (stored
before keys were sealed) is sealed when the catalog loads, where a key is configured.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from modelport.clock import Clock
from modelport.errors import Conflict, InvalidInput, NotFound
from modelport.logs import log_event
from modelport.netpolicy import UrlPolicy, UrlRefused
from modelport.serving.backends.base import Backend
from modelport.serving.backends.remote_openai import RemoteOpenAIBackend
from modelport.serving.backends.remote_v2 import DEFAULT_CAPABILITIES, RemoteV2Backend
from modelport.serving.backends.types import RemoteBackendInfo, RemoteKind
from modelport.serving.health import HealthBoard
from modelport.serving.types import Capabilities
from modelport.store import Database
from modelport.store.secrets import SecretBox, is_sealed
from modelport.store.tables import RemoteBackendRow

log = logging.getLogger(__name__)

NAME_RE = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")
RESERVED = frozenset({"local"})


def backend_not_found(name: str) -> NotFound:
    return NotFound(f"backend {name!r} not found", code="backend_not_found", backend=name)


def build_backend(
    info: RemoteBackendInfo, api_key: str | None, policy: UrlPolicy, clock: Clock | None = None
) -> Backend:
    """The backend object for a declaration (no I/O); its connections go through
    ``policy``; its requests' deadlines are on ``clock``."""
    caps = info.capabilities
    models = caps.get("models") or {}
    if info.kind is RemoteKind.REMOTE_OPENAI:
        return RemoteOpenAIBackend(
            info.name,
            info.url,
            formats=frozenset(caps.get("formats") or ()),
            context_length=caps.get("context_length"),
            max_batch_size=caps.get("max_batch_size", 64),
            api_key=api_key,
            models=models,
            policy=policy,
            clock=clock,
        )
    capabilities = Capabilities(
        formats=frozenset(caps.get("formats") or DEFAULT_CAPABILITIES.formats),
        max_batch_size=caps.get("max_batch_size", DEFAULT_CAPABILITIES.max_batch_size),
        hardware=frozenset(caps.get("hardware") or ("cpu",)),
    )
    return RemoteV2Backend(
        info.name,
        info.url,
        api_key=api_key,
        models=models,
        capabilities=capabilities,
        policy=policy,
        clock=clock,
    )


class BackendCatalog:
    def __init__(
        self,
        database: Database,
        board: HealthBoard,
        box: SecretBox,
        policy: UrlPolicy,
        clock: Clock | None = None,
    ) -> None:
        self.database = database
        self.clock = clock
        self.policy = policy
        self.board = board
        self.box = box
        self._built: dict[str, Backend] = {}

    # ---- lookups (no I/O: the router and the controller call these)
    def backend(self, name: str) -> Backend | None:
        """The built backend of that name, if declared."""
        return self._built.get(name)

    def tenant_of(self, name: str) -> str | None:
        """The tenant owning that backend (None: not declared)."""
        with self.database.transaction() as session:
            return session.scalar(
                select(RemoteBackendRow.tenant).where(RemoteBackendRow.name == name)
            )

    # ---- the table
    def load(self) -> None:
        """Build and register every declared backend (at start). A stored key no
        configured secret key opens fails the start (``secret_unreadable``)."""
        legacy = 0
        with self.database.transaction() as session:
            rows = session.scalars(select(RemoteBackendRow)).all()
            declared = []
            for row in rows:
                stored = row.api_key
                if stored is not None and not is_sealed(stored) and self.box.can_seal:
                    row.api_key = self.box.seal(stored)
                    legacy += 1
                declared.append((_info(row), None if stored is None else self.box.open(stored)))
        if legacy:
            log_event(log, "secrets.sealed_legacy", column="remote_backends.api_key", rows=legacy)
        for info, api_key in declared:
            self._install(info, api_key)

    def get(self, name: str) -> RemoteBackendInfo:
        with self.database.transaction() as session:
            row = self._row(session, name)
            return _info(row)

    def list(self, tenant: str | None) -> list[RemoteBackendInfo]:
        """Backends of ``tenant`` (None: every tenant's), by name."""
        query = select(RemoteBackendRow).order_by(RemoteBackendRow.name)
        if tenant is not None:
            query = query.where(RemoteBackendRow.tenant == tenant)
        with self.database.transaction() as session:
            return [_info(row) for row in session.scalars(query)]

    def create(
        self,
        tenant: str,
        name: str,
        *,
        kind: str,
        url: str,
        api_key: str | None = None,
        capabilities: Mapping[str, Any] | None = None,
        actor: str,
    ) -> RemoteBackendInfo:
        """Declare a backend (409 ``backend_exists`` if the name is taken; 400
        ``backend_url_not_allowed`` where the policy refuses its URL); its API key is
        stored sealed (503 ``secret_key_required`` where no secret key is configured)."""
        api_key = api_key or None
        if not NAME_RE.match(name) or name in RESERVED:
            raise InvalidInput(
                "backend name must be 1-63 lowercase letters, digits and '-', and not 'local'",
                code="invalid_backend_name",
                field="name",
            )
        if not url.startswith(("http://", "https://")):
            raise InvalidInput("url must be http(s)://", code="invalid_backend_url", field="url")
        self._check_url(url)
        row = RemoteBackendRow(
            name=name,
            tenant=tenant,
            kind=RemoteKind(kind).value,
            url=url.rstrip("/"),
            api_key=None if api_key is None else self.box.seal(api_key),
            capabilities=dict(capabilities or {}),
            created_by=actor,
        )
        with self.database.transaction() as session:
            if session.scalar(select(RemoteBackendRow.id).where(RemoteBackendRow.name == name)):
                raise Conflict(
                    f"backend {name!r} already exists", code="backend_exists", backend=name
                )
            session.add(row)
            session.flush()
            info = _info(row)
        self._install(info, api_key)
        return info

    def delete(self, name: str, *, in_use: bool) -> Backend | None:
        """Remove a declaration (409 ``backend_in_use`` while a live deployment names it).
        Returns the built backend, for the caller to close."""
        if in_use:
            raise Conflict(
                f"backend {name!r} serves a live deployment", code="backend_in_use", backend=name
            )
        with self.database.transaction() as session:
            session.delete(self._row(session, name))
        self.board.unregister(name)
        return self._built.pop(name, None)

    def _check_url(self, url: str) -> None:
        try:
            self.policy.check(url)
        except UrlRefused as exc:
            raise InvalidInput(
                exc.message, code="backend_url_not_allowed", field="url", url=url[:200]
            ) from None

    def _row(self, session: Session, name: str) -> RemoteBackendRow:
        row = session.scalar(select(RemoteBackendRow).where(RemoteBackendRow.name == name))
        if row is None:
            raise backend_not_found(name)
        return row

    def _install(self, info: RemoteBackendInfo, api_key: str | None) -> None:
        backend = build_backend(info, api_key, self.policy, self.clock)
        self._built[info.name] = backend
        self.board.register(backend)

    async def close(self) -> None:
        for backend in list(self._built.values()):
            await backend.close()


def _info(row: RemoteBackendRow) -> RemoteBackendInfo:
    return RemoteBackendInfo(
        name=row.name,
        tenant=row.tenant,
        kind=RemoteKind(row.kind),
        url=row.url,
        has_api_key=bool(row.api_key),
        capabilities=dict(row.capabilities),
        created_at=row.created_at,
        created_by=row.created_by,
    )
