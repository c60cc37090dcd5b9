"""Which direct version calls the prediction log keeps, and with what.

An endpoint call is always logged (its endpoint's ``LogPolicy`` says whether inputs and
outputs go with it). A direct call of a registry version (``/v2`` by version, ``/v1`` by
model name, gRPC, ``:predict``) is logged only where a sampling rate asks for it, and
none does by default:

- a **tenant** sets a rate for its own calls (``PUT /api/tenants/{tenant}/prediction-log``,
  ``tenant.manage``);
- a **version**'s owner sets a rate for the calls of that version, whoever makes them
  (``PUT /api/models/{owner}/{name}/versions/{version}/prediction-log``,
  ``model.register`` on the model).

The rate that applies to a call is the higher of its caller's tenant's and its version's.
Whether a call is kept is decided from its id (``keeps``): a retried call (same call id)
is decided the same way, and a rate of 0.5 keeps the same half whichever process answers.

A kept call's record always has its metadata (ids, tenant, version, status, latency,
stages); its inputs and outputs only where payload logging is on: the caller's tenant's
switch where it set a policy (its opt-out wins, as does its opt-in: a consumer's own
choice about its data), else the version's, for its owner's own calls only (another
tenant's inputs never reach a publisher's log unless that tenant opted in). The record's ``owner`` is the version's owner
tenant (whose log it is: its retention applies, it reads it), ``tenant`` the caller's.

The policies are read from the database into this process (``refresh``: at start, every
``REFRESH_SECONDS``, and at once after a change made here). With none set anywhere,
``active`` is False and a call does nothing more than read it.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select

from modelport.errors import InvalidInput
from modelport.store import Database
from modelport.store.base import utcnow
from modelport.store.tables import PredictionSamplingRow

REFRESH_SECONDS = 5.0
"""How soon a policy changed in another process reaches this one."""

TENANT = "tenant"
VERSION = "version"


@dataclass(frozen=True)
class SamplingPolicy:
    """What the prediction log keeps of the direct calls a policy covers."""

    rate: float = 0.0
    """The share of calls logged, 0 (none) to 1 (all)."""
    payloads: bool = False
    """Keep the calls' inputs and outputs too (else only the metadata)."""


OFF = SamplingPolicy()


def keeps(call_id: str, rate: float) -> bool:
    """Whether the call ``call_id`` is in the ``rate`` share of calls: the same answer
    for the same id everywhere (the first 8 bytes of its SHA-256 against ``rate``)."""
    if rate <= 0.0:
        return False
    if rate >= 1.0:
        return True
    point = int.from_bytes(hashlib.sha256(call_id.encode()).digest()[:8], "big")
    return point < rate * (1 << 64)


def _version_subject(model: str, version: str) -> str:
    return f"{model}/{version}"


class PredictionSampling:
    """The tenants' and versions' sampling policies, stored and kept in this process."""

    def __init__(self, database: Database, *, now: Callable[[], datetime] = utcnow) -> None:
        self.database = database
        self._now = now
        self._tenants: dict[str, SamplingPolicy] = {}
        self._versions: dict[str, SamplingPolicy] = {}
        self._lock = threading.Lock()  # a refresh's read and its swap, from any thread
        self.active = False
        """Some tenant or version has a policy: calls must be decided."""

    # ---- the hot path
    def decide(self, call_id: str, tenant: str | None, model: str, version: str) -> bool | None:
        """None: the call is not logged; else whether its payloads are."""
        mine = self._tenants.get(tenant) if tenant is not None else None
        theirs = self._versions.get(_version_subject(model, version))
        if mine is None and theirs is None:
            return None
        rate = max(mine.rate if mine else 0.0, theirs.rate if theirs else 0.0)
        if not keeps(call_id, rate):
            return None
        if mine is not None:
            return mine.payloads
        # The version's switch covers its owner's own calls (and the platform admin's)
        # only: another tenant's inputs reach the publisher's log only where that tenant
        # opted in (its data).
        own = tenant is None or tenant == model.partition("/")[0]
        return bool(theirs and theirs.payloads and own)

    # ---- reading and setting
    def refresh(self) -> None:
        """Read every policy afresh (a background loop's step)."""
        with self._lock:
            with self.database.transaction() as session:
                rows = session.execute(select(PredictionSamplingRow)).scalars().all()
                tenants = {
                    r.subject: SamplingPolicy(r.rate, r.payloads) for r in rows if r.scope == TENANT
                }
                versions = {
                    r.subject: SamplingPolicy(r.rate, r.payloads)
                    for r in rows
                    if r.scope == VERSION
                }
            self._tenants, self._versions = tenants, versions
            self.active = bool(tenants or versions)

    def tenant_policy(self, tenant: str) -> tuple[SamplingPolicy, bool]:
        """The tenant's policy, and whether it set one (False: off)."""
        return self._policy(TENANT, tenant)

    def version_policy(self, model: str, version: str) -> tuple[SamplingPolicy, bool]:
        """The version's policy (``model`` is ``owner/name``), and whether one is set."""
        return self._policy(VERSION, _version_subject(model, version))

    def set_tenant(self, tenant: str, policy: SamplingPolicy | None, *, actor: str) -> None:
        """Set the tenant's policy for its calls (None: off again)."""
        self._set(TENANT, tenant, policy, actor)

    def set_version(
        self, model: str, version: str, policy: SamplingPolicy | None, *, actor: str
    ) -> None:
        """Set the version's policy for the calls made of it (None: off again)."""
        self._set(VERSION, _version_subject(model, version), policy, actor)

    def _policy(self, scope: str, subject: str) -> tuple[SamplingPolicy, bool]:
        with self.database.transaction() as session:
            row = session.get(PredictionSamplingRow, (scope, subject))
        return (SamplingPolicy(row.rate, row.payloads), True) if row is not None else (OFF, False)

    def _set(self, scope: str, subject: str, policy: SamplingPolicy | None, actor: str) -> None:
        if policy is not None and not 0.0 <= policy.rate <= 1.0:
            raise InvalidInput(
                "rate is a share of calls from 0 to 1", code="invalid_sampling", field="rate"
            )
        with self.database.transaction() as session:
            row = session.get(PredictionSamplingRow, (scope, subject))
            if policy is None:
                if row is not None:
                    session.delete(row)
            elif row is None:
                session.add(
                    PredictionSamplingRow(
                        scope=scope,
                        subject=subject,
                        rate=policy.rate,
                        payloads=policy.payloads,
                        updated_by=actor,
                    )
                )
            else:
                row.rate, row.payloads = policy.rate, policy.payloads
                row.updated_by, row.updated_at = actor, self._now()
        self.refresh()
