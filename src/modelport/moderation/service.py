"""``ModerationService``: tenants' policies (versioned, cached per tenant), moderation of
texts under them, and the audit of every decision.

Call order on a moderated path: ``policy_for(tenant)`` (a dict lookup once cached: a
tenant without a policy costs nothing more), then ``check(texts, policy, subject)``,
which runs the rules and the policy's classifier, records the decision and raises
``content_blocked`` (400) when it blocks. ``set_policy`` stores a new version and
publishes ``ModerationPolicyChanged``: every process's cache drops the tenant's entry
(``forget``); the TTL bounds staleness should an event be lost.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence

from modelport.changes import ChangeBus, ModerationPolicyChanged
from modelport.clock import Clock, SystemClock
from modelport.errors import InvalidInput, ModelportError, NotFound, Unavailable
from modelport.moderation import repository
from modelport.moderation.interface import Moderator
from modelport.moderation.rules import RuleModerator, compile_rule
from modelport.moderation.types import (
    Decision,
    DecisionPage,
    DecisionQuery,
    DecisionRecord,
    Disposition,
    Policy,
    PolicyDraft,
    Subject,
    combine,
)
from modelport.store.database import Database

CACHE_TTL_SECONDS = 30.0
"""How long a process trusts its cached policy of a tenant without a change event."""

MAX_RULES = 100
MAX_TERMS = 1000
"""The most words and patterns, all rules together."""

_MODEL_REF = re.compile(r"^[a-z0-9][a-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*(:[A-Za-z0-9_.+-]+)?$")


class ContentBlocked(InvalidInput):
    """Moderation blocked a call's input or output (400 ``content_blocked``)."""

    default_code = "content_blocked"


def blocked(decision: Decision, subject: Subject) -> ContentBlocked:
    what = "input" if subject.stage.value == "input" else "output"
    categories = ", ".join(decision.categories) or "policy"
    return ContentBlocked(
        f"the {what} was blocked by the content policy ({categories})",
        code="content_blocked",
        stage=subject.stage.value,
        categories=list(decision.categories),
    )


class ModerationService:
    """See the module docstring. One per process; safe from any thread and loop."""

    def __init__(
        self,
        database: Database,
        *,
        changes: ChangeBus | None = None,
        clock: Clock | None = None,
        classifier: Moderator | None = None,
        cache_ttl_seconds: float = CACHE_TTL_SECONDS,
    ) -> None:
        self.database = database
        self.changes = changes
        self.clock = clock or SystemClock()
        self.rules = RuleModerator()
        self.classifier = classifier
        """Runs a policy's classifier model (``ModelModerator``); None: policies naming
        one fail closed (503 ``moderation_unavailable``)."""
        self.ttl = cache_ttl_seconds
        self._cache: dict[str, tuple[Policy | None, float]] = {}

    # ---- policies
    def get_policy(self, tenant: str, version: int | None = None) -> Policy:
        """The tenant's policy in force, or one of its versions (404
        ``moderation_policy_not_found``)."""
        with self.database.transaction() as session:
            if version is None:
                policy = repository.current_policy(session, tenant)
            else:
                policy = repository.policy_version(session, tenant, version)
        if policy is None:
            raise NotFound(
                f"tenant {tenant} has no moderation policy"
                + ("" if version is None else f" version {version}"),
                code="moderation_policy_not_found",
            )
        return policy

    def policy_versions(self, tenant: str) -> list[Policy]:
        with self.database.transaction() as session:
            return repository.policy_versions(session, tenant)

    def set_policy(self, tenant: str, draft: PolicyDraft, actor: str) -> Policy:
        """Store ``draft`` as the tenant's next policy version, in force at once here and,
        through the change event, in every process."""
        check_draft(draft)
        with self.database.transaction() as session:
            policy = repository.add_policy_version(session, tenant, draft, actor, self.clock.now())
        self.forget(tenant)
        if self.changes is not None:
            self.changes.publish(ModerationPolicyChanged(tenant))
        return policy

    def forget(self, tenant: str) -> None:
        """Drop the cached policy of ``tenant``. Safe from any thread."""
        self._cache.pop(tenant, None)

    def forget_all(self) -> None:
        self._cache.clear()

    def cached(self, tenant: str) -> tuple[bool, Policy | None]:
        """(known, the tenant's active policy or None) from the cache, without I/O."""
        entry = self._cache.get(tenant)
        if entry is None or entry[1] <= self.clock.monotonic():
            return False, None
        return True, entry[0]

    def has_policy(self, tenant: str) -> bool:
        """Whether ``tenant`` has an active policy (cached). Blocking."""
        known, policy = self.cached(tenant)
        return (policy if known else self.load(tenant)) is not None

    def load(self, tenant: str) -> Policy | None:
        """The tenant's active policy (None: none, or one that moderates nothing), read
        from the database and cached. Blocking."""
        expires = self.clock.monotonic() + self.ttl
        with self.database.transaction() as session:
            policy = repository.current_policy(session, tenant)
        active = policy if policy is not None and policy.active else None
        self._cache[tenant] = (active, expires)
        return active

    async def policy_for(self, tenant: str) -> Policy | None:
        """The tenant's active policy, cached: no await at all once known."""
        known, policy = self.cached(tenant)
        if known:
            return policy
        return await asyncio.to_thread(self.load, tenant)

    # ---- moderation
    async def moderate(self, texts: Sequence[str], policy: Policy) -> Decision:
        """The policy's rules, then its classifier (unless the rules already block)."""
        decision = self.rules.judge(texts, policy)
        if policy.classifier is None or decision.disposition is Disposition.BLOCKED:
            return decision
        if self.classifier is None:
            raise Unavailable(
                "this process cannot run the policy's classifier", code="moderation_unavailable"
            )
        try:
            judged = await self.classifier.moderate(texts, policy)
        except ModelportError as exc:
            raise Unavailable(
                f"the policy's classifier {policy.classifier} failed: {exc.code}",
                code="moderation_unavailable",
            ) from exc
        return combine([decision, judged])

    async def check(self, texts: Sequence[str], policy: Policy, subject: Subject) -> Decision:
        """Moderate, record the decision, and raise ``content_blocked`` when it blocks."""
        decision = await self.moderate(texts, policy)
        await asyncio.to_thread(self.record, subject, policy, decision)
        if decision.disposition is Disposition.BLOCKED:
            raise blocked(decision, subject)
        return decision

    def record(self, subject: Subject, policy: Policy, decision: Decision) -> DecisionRecord:
        """Audit one decision. Blocking."""
        with self.database.transaction() as session:
            return repository.add_decision(session, subject, policy, decision, self.clock.now())

    def decisions(self, query: DecisionQuery) -> DecisionPage:
        with self.database.transaction() as session:
            return repository.search_decisions(session, query)


def check_draft(draft: PolicyDraft) -> None:
    """Refuse a policy that cannot work (400): bad patterns, thresholds or model ref."""
    if len(draft.rules) > MAX_RULES:
        raise InvalidInput(f"at most {MAX_RULES} rules", code="invalid_policy")
    if sum(len(r.words) + len(r.patterns) for r in draft.rules) > MAX_TERMS:
        raise InvalidInput(f"at most {MAX_TERMS} words and patterns in all", code="invalid_policy")
    for rule in draft.rules:
        if not rule.category:
            raise InvalidInput("every rule needs a category", code="invalid_policy")
        compile_rule(rule)
    for category, threshold in draft.thresholds.items():
        if not (0.0 <= threshold.flag <= threshold.block <= 1.0):
            raise InvalidInput(
                f"threshold {category!r}: need 0 <= flag <= block <= 1", code="invalid_policy"
            )
    if draft.classifier is not None and not _MODEL_REF.match(draft.classifier):
        raise InvalidInput(
            "classifier must be owner/name or owner/name:version", code="invalid_policy"
        )
